package merchant

import (
	"bytes"
	"encoding/json"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
)

// SawField reports whether value arrived as a whole field in a request the
// site received: a query or form value, a JSON string or number, a multipart
// part, or a whole header value other than the body's length. Short values
// (a 3-digit CVV) need this: as a substring they turn up by chance in
// ports, postcodes and multipart boundaries, which would make a leak check
// flaky in either direction.
func (s *Site) SawField(value string) bool {
	if value == "" {
		return false
	}
	for _, r := range s.Requests() {
		if r.hasField(value) {
			return true
		}
	}
	return false
}

func (r Request) hasField(v string) bool {
	for _, seg := range strings.Split(r.Path, "/") {
		if seg == v {
			return true
		}
	}
	if valuesHave(r.RawQuery, v) {
		return true
	}
	for name, vs := range r.Header {
		if name == "Content-Length" {
			// The browser computes the body's length: no value rides in
			// it, and a 3-digit length equals a 3-digit CVV one request
			// in a thousand.
			continue
		}
		for _, hv := range vs {
			if hv == v {
				return true
			}
		}
	}
	return bodyHasField(r.Header.Get("Content-Type"), r.Body, v)
}

func valuesHave(raw, v string) bool {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return false
	}
	for _, vs := range q {
		for _, x := range vs {
			if x == v {
				return true
			}
		}
	}
	return false
}

func bodyHasField(contentType string, body []byte, v string) bool {
	if len(body) == 0 {
		return false
	}
	mt, params, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				return false
			}
			var b bytes.Buffer
			if _, err := b.ReadFrom(p); err == nil && (b.String() == v || bodyHasField(p.Header.Get("Content-Type"), b.Bytes(), v)) {
				return true
			}
		}
	case json.Valid(body):
		var x any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if dec.Decode(&x) != nil {
			return false
		}
		return jsonHas(x, v)
	default:
		return valuesHave(string(body), v)
	}
}

func jsonHas(x any, v string) bool {
	switch t := x.(type) {
	case string:
		return t == v
	case json.Number:
		return t.String() == v
	case []any:
		for _, e := range t {
			if jsonHas(e, v) {
				return true
			}
		}
	case map[string]any:
		for _, e := range t {
			if jsonHas(e, v) {
				return true
			}
		}
	}
	return false
}
