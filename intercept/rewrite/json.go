package rewrite

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	agentvault "github.com/agentvault/agentvault"
)

// JSON rewrites a JSON document without re-marshalling it: a small scanner
// finds every string literal (keys included) and every number, offers each
// decoded value to the replacer as one whole field, and splices a changed
// value back in place. Object order, whitespace, number spelling and the
// escaping of untouched strings are preserved byte for byte.
//
// The scanner is deliberately lenient (it does not validate structure) so it
// also covers NDJSON, JSON sequences and truncated documents: whatever looks
// like a string or a number is visited. A number whose replacement is not a
// JSON number (a CVV with a leading zero, say) cannot be written back without
// changing its type, so it is refused.
func JSON(body []byte, r Replacer) ([]byte, int, error) {
	return jsonRewrite(body, r, false)
}

// jsonSplice is one value JSON replaces: body[start:end] becomes rep.
type jsonSplice struct {
	start, end int
	rep        []byte
}

// jsonRewrite is JSON; with inPlace it may write the result over body and
// return body itself (BodyInPlace). The changes are kept aside until the
// walk has visited every value, so nothing the walk or the replacer reads
// (the replacer may read body through a FieldVisitor's caller) sees body
// half rewritten; then, when each replacement is as long as what it
// replaces (a format-preserving stand-in swapped for its real value),
// they are written over body, else into one buffer of the exact size.
func jsonRewrite(body []byte, r Replacer, inPlace bool) ([]byte, int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	var splices []jsonSplice
	defer func() {
		for _, sp := range splices {
			clear(sp.rep) // a real value, copied where it belongs
		}
	}()
	total := 0
	var st *jsonStructure
	if v := visitor(r); v != nil {
		st = &jsonStructure{v: v, root: v.newGroup()}
	}
	splice := func(start, end int, rep []byte) {
		splices = append(splices, jsonSplice{start, end, rep})
	}
	strs := newJSONStrings(body)
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '"':
			end, closed, escaped := strs.scan(i)
			inner := body[i+1 : end]
			if closed {
				inner = body[i+1 : end-1]
			}
			dec := inner
			if escaped {
				dec = jsonUnescape(inner)
			}
			if st != nil {
				st.value(dec, isKey(body, end), false)
			}
			rep, n, err := field(r, dec)
			if err != nil {
				return nil, 0, err
			}
			if n > 0 {
				total += n
				splice(i, end, appendJSONString(nil, rep, closed))
			}
			i = end
		case (c == '-' || ('0' <= c && c <= '9')) && (i == 0 || startsValue(body[i-1])):
			j := i + 1
			for j < len(body) && isNumberByte(body[j]) {
				j++
			}
			if st != nil {
				st.value(body[i:j], false, true)
			}
			rep, n, err := field(r, body[i:j])
			if err != nil {
				return nil, 0, err
			}
			if n > 0 {
				if !isJSONNumber(rep) {
					return nil, 0, agentvault.Errorf(agentvault.CodeSubstitution,
						"a JSON number at offset %d would be replaced by a value that is not a number", i)
				}
				total += n
				splice(i, j, rep)
			}
			i = j
		default:
			if st != nil {
				st.punct(c)
			}
			i++
		}
	}
	if total == 0 {
		return body, 0, nil
	}
	return applySplices(body, splices, inPlace), total, nil
}

// applySplices returns body with splices (in order, not overlapping)
// applied: written over body when inPlace allows and no replacement
// changes a length, else in a new buffer.
func applySplices(body []byte, splices []jsonSplice, inPlace bool) []byte {
	size, same := len(body), true
	for _, sp := range splices {
		size += len(sp.rep) - (sp.end - sp.start)
		same = same && len(sp.rep) == sp.end-sp.start
	}
	if inPlace && same {
		for _, sp := range splices {
			copy(body[sp.start:sp.end], sp.rep)
		}
		return body
	}
	out, last := make([]byte, 0, size), 0
	for _, sp := range splices {
		out = append(append(out, body[last:sp.start]...), sp.rep...)
		last = sp.end
	}
	return append(out, body[last:]...)
}

// startsValue reports whether a JSON value may follow byte c. A run of
// digits after anything else (a letter, say, in a document that is not
// really JSON) is part of something longer and not a number field.
func startsValue(c byte) bool {
	switch c {
	case '[', '{', ',', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func isNumberByte(c byte) bool {
	return ('0' <= c && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

func isJSONNumber(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || ('0' <= b[0] && b[0] <= '9')) && json.Valid(b)
}

// jsonStrings finds where a document's string literals end. It keeps the
// place of the next backslash, so the document is searched for one once
// in all rather than once a string: a large literal without any costs one
// search for its closing quote. Its calls go forward through b.
type jsonStrings struct {
	b        []byte
	from, bs int // bs: the first backslash at or after from, len(b) if none
}

func newJSONStrings(b []byte) *jsonStrings { return &jsonStrings{b: b, from: len(b) + 1} }

// backslash returns the index of the first backslash at or after j, or
// len(b).
func (s *jsonStrings) backslash(j int) int {
	if j < s.from || j > s.bs {
		s.from, s.bs = j, len(s.b)
		if k := bytes.IndexByte(s.b[j:], '\\'); k >= 0 {
			s.bs = j + k
		}
	}
	return s.bs
}

// scan returns the index just past the string literal opening at
// b[start], whether it was closed (an unterminated literal runs to the
// end) and whether it holds a backslash (without one it needs no
// unescaping).
func (s *jsonStrings) scan(start int) (end int, closed, escaped bool) {
	// Jump from quote to quote (IndexByte is vectorised: a 1 MiB value
	// cost a byte loop before); a quote is the end unless a backslash
	// before it escapes it.
	b := s.b
	for j := start + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return len(b), false, escaped || s.backslash(j) < len(b)
		}
		e := s.backslash(j)
		if e >= j+q {
			return j + q + 1, true, escaped
		}
		escaped = true
		j = e + 2 // the escaped byte is skipped, whatever it is
	}
	return len(b), false, escaped
}

// jsonUnescape decodes the inside of a string literal the way encoding/json
// does, including \uXXXX and UTF-16 surrogate pairs; a lone surrogate becomes
// U+FFFD as in encoding/json. An invalid escape is kept literally (the
// document is not valid JSON, but its bytes are still searched). It returns s
// itself when there is no escape.
func jsonUnescape(s []byte) []byte {
	i := bytes.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	out = append(out, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
			i += 2
		case 'b':
			out = append(out, '\b')
			i += 2
		case 'f':
			out = append(out, '\f')
			i += 2
		case 'n':
			out = append(out, '\n')
			i += 2
		case 'r':
			out = append(out, '\r')
			i += 2
		case 't':
			out = append(out, '\t')
			i += 2
		case 'u':
			r1, ok := hex4(s[i+2:])
			if !ok {
				out = append(out, c)
				i++
				continue
			}
			i += 6
			if utf16.IsSurrogate(r1) {
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2, ok := hex4(s[i+2:]); ok {
						if dec := utf16.DecodeRune(r1, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
				}
				r1 = utf8.RuneError
			}
			out = utf8.AppendRune(out, r1)
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		v, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// appendJSONString writes s as a string literal. Only what JSON requires is
// escaped (quote, backslash, control characters) plus U+2028/U+2029 as
// encoding/json does, so a replaced value keeps its length where it can.
func appendJSONString(dst, s []byte, closeQuote bool) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	if closeQuote {
		dst = append(dst, '"')
	}
	return dst
}

// jsonStructure follows objects and arrays through JSON's lenient scan for
// a FieldVisitor: which key a value sits under and which object it shares.
// Mismatched brackets (the scan does not validate) pop whatever is open.
type jsonStructure struct {
	v     *scratchReplacer
	root  int // group of top-level scalars
	stack []jsonFrame
}

type jsonFrame struct {
	array bool
	path  []string // the path of the object or array itself
	key   string   // an object's current member key
	group int
}

// valuePath is the path of a value starting here.
func (s *jsonStructure) valuePath() []string {
	if len(s.stack) == 0 {
		return nil
	}
	top := &s.stack[len(s.stack)-1]
	if top.array {
		return top.path
	}
	return append(slices.Clip(top.path), top.key)
}

func (s *jsonStructure) group() int {
	if len(s.stack) == 0 {
		return s.root
	}
	return s.stack[len(s.stack)-1].group
}

func (s *jsonStructure) punct(c byte) {
	switch c {
	case '{':
		s.stack = append(s.stack, jsonFrame{path: s.valuePath(), group: s.v.newGroup()})
	case '[':
		s.stack = append(s.stack, jsonFrame{array: true, path: s.valuePath(), group: s.group()})
	case '}', ']':
		if len(s.stack) > 0 {
			s.stack = s.stack[:len(s.stack)-1]
		}
	case ',':
		if len(s.stack) > 0 {
			s.stack[len(s.stack)-1].key = ""
		}
	}
}

// value reports a string or number; a key becomes the current member key.
func (s *jsonStructure) value(v []byte, key, number bool) {
	if key {
		var path []string
		if len(s.stack) > 0 {
			top := &s.stack[len(s.stack)-1]
			path = top.path
			if !top.array {
				top.key = string(v)
			}
		}
		s.v.emit(Field{Source: SourceJSON, Path: path, Group: s.group(), Value: v, Name: true})
		return
	}
	s.v.emit(Field{Source: SourceJSON, Path: s.valuePath(), Group: s.group(), Value: v, Number: number})
}

// isKey reports whether the string literal ending before end is an object
// key: the next byte past white space is a colon.
func isKey(b []byte, end int) bool {
	for ; end < len(b); end++ {
		switch b[end] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}
