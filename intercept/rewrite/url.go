package rewrite

import (
	"net/url"
	"strings"
)

// URL rewrites dst in place: each path segment and each query key and value is
// decoded, offered to the replacer as one whole field and, only if it
// changed, re-encoded (PathEscape for segments, QueryEscape for the query).
// Path and RawPath are kept consistent so that dst.EscapedPath() is what goes
// on the wire. Userinfo, if present, is rewritten too. The fragment is never
// sent by a client and is left alone.
func URL(dst *url.URL, r Replacer) (int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	// Work on a copy so that a refusal leaves dst as it was.
	c := *dst
	u := &c
	total := 0
	if u.Opaque != "" {
		rep, n, err := urlField(r, u.Opaque)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			u.Opaque = escapeOpaque(string(rep))
			total += n
		}
	} else {
		n, err := rewritePath(u, r)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if u.RawQuery != "" {
		q, n, err := rewritePairs([]byte(u.RawQuery), r, SourceQuery)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			u.RawQuery = string(q)
			total += n
		}
	}
	if u.User != nil {
		n, err := rewriteUserinfo(u, r)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if total > 0 {
		*dst = c
	}
	return total, nil
}

// urlField offers one part of a URL (a path segment, an opaque URL)
// percent-decoded, as one whole field, to the visitor and the replacer.
func urlField(r Replacer, part string) ([]byte, int, error) {
	dec := percentDecode([]byte(part), false)
	if v := visitor(r); v != nil {
		v.emit(Field{Source: SourceURL, Value: dec})
	}
	return field(r, dec)
}

func rewritePath(u *url.URL, r Replacer) (int, error) {
	esc := u.EscapedPath()
	if esc == "" {
		return 0, nil
	}
	segs := strings.Split(esc, "/")
	total := 0
	for i, s := range segs {
		if s == "" {
			continue
		}
		rep, n, err := urlField(r, s)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			segs[i] = url.PathEscape(string(rep))
			total += n
		}
	}
	if total == 0 {
		return 0, nil
	}
	newEsc := strings.Join(segs, "/")
	p, err := url.PathUnescape(newEsc)
	if err != nil {
		// Cannot happen: untouched segments come from EscapedPath, which
		// is always validly encoded, and changed ones from PathEscape.
		return 0, pathError()
	}
	u.Path = p
	u.RawPath = ""
	if (&url.URL{Path: p}).EscapedPath() != newEsc {
		u.RawPath = newEsc
	}
	return total, nil
}

func rewriteUserinfo(u *url.URL, r Replacer) (int, error) {
	name := u.User.Username()
	pass, hasPass := u.User.Password()
	v := visitor(r)
	if v != nil {
		v.emit(Field{Source: SourceURL, Value: []byte(name)})
	}
	nrep, n1, err := field(r, []byte(name))
	if err != nil {
		return 0, err
	}
	prep, n2 := []byte(pass), 0
	if hasPass {
		if v != nil {
			v.emit(Field{Source: SourceURL, Value: prep})
		}
		if prep, n2, err = field(r, prep); err != nil {
			return 0, err
		}
	}
	if n1+n2 == 0 {
		return 0, nil
	}
	if hasPass {
		u.User = url.UserPassword(string(nrep), string(prep))
	} else {
		u.User = url.User(string(nrep))
	}
	return n1 + n2, nil
}

// escapeOpaque percent-encodes what a changed opaque part must not carry raw.
func escapeOpaque(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), "%3A", ":")
}
