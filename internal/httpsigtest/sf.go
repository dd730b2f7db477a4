package httpsigtest

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// A parser and serialiser of the Structured Field Values (RFC 8941) a
// verifier meets in Signature-Input, Signature and Signature-Agent,
// written from the RFC's parsing algorithms (section 4.2) and nothing else.

// bareKind is the type of a bare item.
type bareKind int

const (
	kindInteger bareKind = iota + 1
	kindDecimal
	kindString
	kindToken
	kindBytes
	kindBoolean
)

// Bare is a bare item.
type Bare struct {
	Kind    bareKind
	Int     int64
	Decimal string // as written
	Str     string // string or token
	Bytes   []byte
	Bool    bool
}

// Param is one parameter.
type Param struct {
	Key string
	Val Bare
}

// Item is a bare item with its parameters.
type Item struct {
	Bare
	Params []Param
}

// Member is one dictionary member: an item, or an inner list of items,
// with the member's parameters.
type Member struct {
	Key     string
	Inner   bool
	Item    Item   // when !Inner
	List    []Item // when Inner
	LParams []Param
}

// Param returns the member's parameter named k.
func (m Member) Param(k string) (Bare, bool) { return findParam(m.LParams, k) }

func findParam(ps []Param, k string) (Bare, bool) {
	for _, p := range ps {
		if p.Key == k {
			return p.Val, true
		}
	}
	return Bare{}, false
}

type sfParser struct {
	s string
	i int
}

var errSF = errors.New("structured field does not parse")

// ParseDictionary parses a Dictionary field value (RFC 8941 section 4.2.2).
// A key given twice keeps its last value, in the first one's place.
func ParseDictionary(s string) ([]Member, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []Member
	for p.i < len(p.s) {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		m := Member{Key: key}
		if p.peek() == '=' {
			p.i++
			if err := p.itemOrInner(&m); err != nil {
				return nil, err
			}
		} else {
			m.Item = Item{Bare: Bare{Kind: kindBoolean, Bool: true}}
			if m.Item.Params, err = p.params(); err != nil {
				return nil, err
			}
		}
		if i := indexMember(out, key); i >= 0 {
			out[i] = m
		} else {
			out = append(out, m)
		}
		p.skipOWS()
		if p.i >= len(p.s) {
			return out, nil
		}
		if p.s[p.i] != ',' {
			return nil, errSF
		}
		p.i++
		p.skipOWS()
		if p.i >= len(p.s) {
			return nil, errSF // trailing comma
		}
	}
	return out, nil
}

func indexMember(ms []Member, k string) int {
	for i, m := range ms {
		if m.Key == k {
			return i
		}
	}
	return -1
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfParser) itemOrInner(m *Member) error {
	if p.peek() == '(' {
		m.Inner = true
		p.i++
		for {
			p.skipSP()
			if p.peek() == ')' {
				p.i++
				var err error
				m.LParams, err = p.params()
				return err
			}
			it, err := p.item()
			if err != nil {
				return err
			}
			m.List = append(m.List, it)
			if c := p.peek(); c != ' ' && c != ')' {
				return errSF
			}
		}
	}
	it, err := p.item()
	m.Item = it
	return err
}

func (p *sfParser) item() (Item, error) {
	b, err := p.bare()
	if err != nil {
		return Item{}, err
	}
	ps, err := p.params()
	return Item{Bare: b, Params: ps}, err
}

func (p *sfParser) params() ([]Param, error) {
	var out []Param
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		v := Bare{Kind: kindBoolean, Bool: true}
		if p.peek() == '=' {
			p.i++
			if v, err = p.bare(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for j := range out {
			if out[j].Key == k {
				out[j].Val, replaced = v, true
			}
		}
		if !replaced {
			out = append(out, Param{Key: k, Val: v})
		}
	}
	return out, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		return "", errSF
	}
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (Bare, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		p.i++
		switch p.peek() {
		case '1':
			p.i++
			return Bare{Kind: kindBoolean, Bool: true}, nil
		case '0':
			p.i++
			return Bare{Kind: kindBoolean}, nil
		}
		return Bare{}, errSF
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.i
		p.i++
		for p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return Bare{Kind: kindToken, Str: p.s[start:p.i]}, nil
	}
	return Bare{}, errSF
}

func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) number() (Bare, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= '0' && c <= '9' {
			digits++
			p.i++
			continue
		}
		if c == '.' && dot < 0 {
			dot = p.i
			p.i++
			continue
		}
		break
	}
	text := p.s[start:p.i]
	if digits == 0 {
		return Bare{}, errSF
	}
	if dot < 0 {
		if digits > 15 {
			return Bare{}, errSF
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return Bare{}, errSF
		}
		return Bare{Kind: kindInteger, Int: n}, nil
	}
	if frac := p.i - dot - 1; frac < 1 || frac > 3 || dot-start > 12 {
		return Bare{}, errSF
	}
	return Bare{Kind: kindDecimal, Decimal: text}, nil
}

func (p *sfParser) str() (Bare, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i >= len(p.s) {
				return Bare{}, errSF
			}
			n := p.s[p.i]
			p.i++
			if n != '"' && n != '\\' {
				return Bare{}, errSF
			}
			b.WriteByte(n)
		case c == '"':
			return Bare{Kind: kindString, Str: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return Bare{}, errSF
		default:
			b.WriteByte(c)
		}
	}
	return Bare{}, errSF
}

func (p *sfParser) bytes() (Bare, error) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return Bare{}, errSF
	}
	raw := p.s[p.i : p.i+end]
	p.i += end + 1
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return Bare{}, errSF
	}
	return Bare{Kind: kindBytes, Bytes: b}, nil
}

// serialisation (RFC 8941 section 4.1), for the signature base.

func (b Bare) serialize() string {
	switch b.Kind {
	case kindInteger:
		return strconv.FormatInt(b.Int, 10)
	case kindDecimal:
		return b.Decimal
	case kindString:
		return strconv.Quote(b.Str) // printable ASCII only (the parser refused the rest): Quote escapes exactly '"' and '\'
	case kindToken:
		return b.Str
	case kindBytes:
		return ":" + base64.StdEncoding.EncodeToString(b.Bytes) + ":"
	case kindBoolean:
		if b.Bool {
			return "?1"
		}
		return "?0"
	}
	return ""
}

func serializeParams(ps []Param) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(";" + p.Key)
		if p.Val.Kind == kindBoolean && p.Val.Bool {
			continue
		}
		b.WriteString("=" + p.Val.serialize())
	}
	return b.String()
}

func (it Item) serialize() string { return it.Bare.serialize() + serializeParams(it.Params) }

func (m Member) serializeValue() string {
	if !m.Inner {
		return m.Item.serialize()
	}
	parts := make([]string, len(m.List))
	for i, it := range m.List {
		parts[i] = it.serialize()
	}
	return "(" + strings.Join(parts, " ") + ")" + serializeParams(m.LParams)
}
