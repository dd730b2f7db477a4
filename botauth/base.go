package botauth

import (
	"strings"

	"github.com/agentvault/agentvault"
)

// component is one covered component identifier (RFC 9421 section 2): a
// derived component ("@authority") or a field name, with its parameters
// ("key" for a dictionary member, section 2.1.2; "req" for a request
// component of a response signature, section 2.4).
type component struct {
	name  string
	key   string // dictionary member, or ""
	req   bool
	value string // the component value in the message at hand
}

// identifier serialises the component identifier as it appears in the
// signature base and in Signature-Input: an sf-string with its parameters.
func (c component) identifier() (string, error) {
	s, err := sfString(c.name)
	if err != nil {
		return "", err
	}
	var ps []param
	if c.key != "" {
		ps = append(ps, strParam("key", c.key))
	}
	if c.req {
		ps = append(ps, flagParam("req"))
	}
	p, err := serializeParams(ps)
	return s + p, err
}

// sigParams are the signature parameters (RFC 9421 section 2.3) in the
// order they are serialised: the order is part of what is signed.
type sigParams struct {
	components []component
	params     []param
}

// serialize is the inner list of covered components with the parameters:
// both the @signature-params value in the base and the Signature-Input
// member value (RFC 9421 section 2.3).
func (p sigParams) serialize() (string, error) {
	var b strings.Builder
	b.WriteByte('(')
	for i, c := range p.components {
		if i > 0 {
			b.WriteByte(' ')
		}
		id, err := c.identifier()
		if err != nil {
			return "", err
		}
		b.WriteString(id)
	}
	b.WriteByte(')')
	ps, err := serializeParams(p.params)
	if err != nil {
		return "", err
	}
	b.WriteString(ps)
	return b.String(), nil
}

// base builds the signature base (RFC 9421 section 2.5): one line per
// covered component, "identifier: value", then the @signature-params line,
// with no newline after it. It also returns the serialised parameters for
// Signature-Input, so the two can never differ.
func (p sigParams) base() (base []byte, input string, err error) {
	input, err = p.serialize()
	if err != nil {
		return nil, "", err
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, c := range p.components {
		id, _ := c.identifier() // serialize succeeded above
		if seen[id] {
			// Section 2.5, step 2.1: a component appears once.
			return nil, "", agentvault.Errorf(agentvault.CodeInternal, "a covered component is listed twice")
		}
		seen[id] = true
		if strings.ContainsAny(c.value, "\r\n") || !printable(c.value) {
			// Section 2.5: a value holding a newline would forge a line.
			return nil, "", agentvault.Errorf(agentvault.CodeMalformedRequest, "a signed component holds a control character")
		}
		b.WriteString(id)
		b.WriteString(": ")
		b.WriteString(c.value)
		b.WriteByte('\n')
	}
	b.WriteString(`"@signature-params": `)
	b.WriteString(input)
	return []byte(b.String()), input, nil
}

// printable reports whether s is visible ASCII or space: what HTTP field
// values and request targets are made of on the wire. Anything else would
// make the base ambiguous between signer and verifier.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
