package rewrite

import (
	"bytes"
	"net/url"
)

// Form rewrites an application/x-www-form-urlencoded body (or a URL's raw
// query): each key and each value is decoded and offered to the replacer as
// one whole field. Pairs keep their order, and a key or value in which
// nothing matched keeps its original bytes, escaping included; only a changed
// one is re-encoded (url.QueryEscape).
func Form(body []byte, r Replacer) ([]byte, int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	return rewritePairs(body, r, SourceForm)
}

func rewritePairs(raw []byte, r Replacer, src FieldSource) ([]byte, int, error) {
	vis, group := visitor(r), 0
	if vis != nil {
		group = vis.newGroup()
	}
	var out []byte
	total, last := 0, 0
	emit := func(start, end int, rep []byte) {
		if out == nil {
			out = make([]byte, 0, len(raw)+64)
		}
		out = append(out, raw[last:start]...)
		out = append(out, url.QueryEscape(string(rep))...)
		last = end
	}
	for start := 0; start <= len(raw); {
		end := bytes.IndexByte(raw[start:], '&')
		if end < 0 {
			end = len(raw)
		} else {
			end += start
		}
		pair := raw[start:end]
		kEnd := len(pair)
		if eq := bytes.IndexByte(pair, '='); eq >= 0 {
			kEnd = eq
		}
		// The key, then the value (if any).
		spans := [][2]int{{start, start + kEnd}}
		if kEnd < len(pair) {
			spans = append(spans, [2]int{start + kEnd + 1, end})
		}
		var key []byte
		for si, sp := range spans {
			if sp[0] == sp[1] {
				continue
			}
			dec := percentDecode(raw[sp[0]:sp[1]], true)
			if vis != nil {
				if si == 0 {
					key = dec
					vis.emit(Field{Source: src, Group: group, Value: dec, Name: true})
				} else {
					vis.emit(Field{Source: src, Group: group, Path: []string{string(key)}, Value: dec})
				}
			}
			rep, n, err := field(r, dec)
			if err != nil {
				return nil, 0, err
			}
			if n > 0 {
				total += n
				emit(sp[0], sp[1], rep)
			}
		}
		start = end + 1
	}
	if total == 0 {
		return raw, 0, nil
	}
	out = append(out, raw[last:]...)
	return out, total, nil
}
