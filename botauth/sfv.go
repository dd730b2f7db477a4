package botauth

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault"
)

// The few Structured Field Values (RFC 8941) the signature fields need,
// serialisation only: botauth writes Signature-Input, Signature and
// Signature-Agent and never parses what a client sent (intercept refuses
// the agent's own).

// sfString serialises an sf-string (RFC 8941 section 4.1.6): printable
// ASCII only, with '"' and '\' escaped.
func sfString(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "a signature parameter holds a character structured fields cannot carry")
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// sfBytes serialises an sf-binary (RFC 8941 section 4.1.8).
func sfBytes(b []byte) string {
	return ":" + base64.StdEncoding.EncodeToString(b) + ":"
}

// validKey reports whether k may name a dictionary member or a parameter
// (RFC 8941 section 3.1.2: lcalpha or "*", then lcalpha, digits, "_", "-",
// "." or "*").
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c == '*':
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// param is one parameter of an inner list or item: an integer, a string or
// the boolean true (serialised as the bare key, RFC 8941 section 4.1.1.2).
type param struct {
	key string
	str *string
	num *int64
}

func strParam(k, v string) param       { return param{key: k, str: &v} }
func intParam(k string, v int64) param { return param{key: k, num: &v} }
func flagParam(k string) param         { return param{key: k} }

func serializeParams(ps []param) (string, error) {
	var b strings.Builder
	for _, p := range ps {
		if !validKey(p.key) {
			return "", agentvault.Errorf(agentvault.CodeInternal, "bad structured field parameter name")
		}
		b.WriteByte(';')
		b.WriteString(p.key)
		switch {
		case p.num != nil:
			// RFC 8941 section 3.3.1: at most 15 digits.
			if *p.num < -999_999_999_999_999 || *p.num > 999_999_999_999_999 {
				return "", agentvault.Errorf(agentvault.CodeInternal, "structured field integer out of range")
			}
			b.WriteByte('=')
			b.WriteString(strconv.FormatInt(*p.num, 10))
		case p.str != nil:
			s, err := sfString(*p.str)
			if err != nil {
				return "", err
			}
			b.WriteByte('=')
			b.WriteString(s)
		}
	}
	return b.String(), nil
}
