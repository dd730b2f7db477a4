package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault/item"
)

// Prefix starts every token. The scanner relies on it being ASCII.
const Prefix = "av_"

// SuffixLen is the length of the per-key suffix.
const SuffixLen = 5

// MaxLabelLen bounds a label; with the longest kind and field a token stays
// under 64 bytes. The vault sizes the labels it hands out by the same bound.
const MaxLabelLen = item.MaxLabelLen

// Token is a parsed mock token such as av_card_1_number_u7x2k.
type Token struct {
	Kind   item.Kind
	Label  string
	Field  item.Field
	Suffix string
}

// kindFields lists the fields a token of each kind may name.
var kindFields = map[item.Kind][]item.Field{
	item.KindCard:     {item.FieldNumber, item.FieldCVV, item.FieldHolder},
	item.KindLogin:    {item.FieldEmail, item.FieldUsername, item.FieldPassword, item.FieldTOTP},
	item.KindIdentity: {item.FieldName, item.FieldEmail, item.FieldPhone},
	item.KindAddress:  {item.FieldLine1, item.FieldLine2, item.FieldCity, item.FieldRegion, item.FieldPostalCode, item.FieldCountry},
}

// Fields returns the fields a token of kind k may name, in catalog order, or
// nil for an unknown kind.
func Fields(k item.Kind) []item.Field {
	fs := kindFields[k]
	if fs == nil {
		return nil
	}
	return append([]item.Field(nil), fs...)
}

// ValidField reports whether a token of kind k may name field f.
func ValidField(k item.Kind, f item.Field) bool {
	for _, g := range kindFields[k] {
		if g == f {
			return true
		}
	}
	return false
}

// ValidLabel reports whether s matches [a-z0-9][a-z0-9-]{0,31}.
func ValidLabel(s string) bool {
	if len(s) == 0 || len(s) > MaxLabelLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

func validSuffix(s string) bool {
	if len(s) != SuffixLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Parse reads a token strictly. A string without the av_ prefix is not a
// token at all (CodeInvalidInput: the caller may treat it as a literal
// value); one with the prefix that breaks the grammar is CodeUnknownToken.
// Neither error repeats the input.
func Parse(s string) (Token, error) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Token{}, agentvault.Errorf(agentvault.CodeInvalidInput, "not a token (no %q prefix)", Prefix)
	}
	bad := func(why string) (Token, error) {
		return Token{}, agentvault.Errorf(agentvault.CodeUnknownToken, "malformed token (%d bytes): %s", len(s), why)
	}
	kind, rest, ok := strings.Cut(rest, "_")
	if !ok {
		return bad("no kind")
	}
	fields, known := kindFields[item.Kind(kind)]
	if !known {
		return bad("unknown kind")
	}
	// Labels never contain '_', so the label ends at the next one; the
	// field (which may contain '_', as postal_code does) is matched against
	// the kind's known names, then exactly one '_' and the suffix follow.
	label, rest, ok := strings.Cut(rest, "_")
	if !ok {
		return bad("no label")
	}
	if !ValidLabel(label) {
		return bad("invalid label")
	}
	if len(rest) < SuffixLen+2 || rest[len(rest)-SuffixLen-1] != '_' {
		return bad("no suffix")
	}
	suffix := rest[len(rest)-SuffixLen:]
	field := rest[:len(rest)-SuffixLen-1]
	if !validSuffix(suffix) {
		return bad("invalid suffix")
	}
	for _, f := range fields {
		if string(f) == field {
			return Token{Kind: item.Kind(kind), Label: label, Field: f, Suffix: suffix}, nil
		}
	}
	return bad("field not valid for kind")
}

// String formats t. It does not validate; Valid does.
func (t Token) String() string {
	var b strings.Builder
	b.Grow(len(Prefix) + len(t.Kind) + len(t.Label) + len(t.Field) + len(t.Suffix) + 3)
	b.WriteString(Prefix)
	b.WriteString(string(t.Kind))
	b.WriteByte('_')
	b.WriteString(t.Label)
	b.WriteByte('_')
	b.WriteString(string(t.Field))
	b.WriteByte('_')
	b.WriteString(t.Suffix)
	return b.String()
}

// Valid reports whether t would survive Parse(t.String()).
func (t Token) Valid() bool {
	return ValidField(t.Kind, t.Field) && ValidLabel(t.Label) && validSuffix(t.Suffix)
}

// suffixContext separates this use of the deployment secret from any other
// key derived from it.
const suffixContext = "agentvault/tokens/suffix/v1\x00"

// Suffix derives the 5-character suffix for one API key of one deployment:
// HMAC-SHA256(deploymentSecret, context || apiKeyID), read as a big-endian
// integer and written in base 36. Tokens copied from another deployment or
// another key therefore name nothing here. The 2^64 mod 36^5 bias is below
// 2^-30 and irrelevant for a namespace tag.
func Suffix(deploymentSecret []byte, apiKeyID string) string {
	mac := hmac.New(sha256.New, deploymentSecret)
	mac.Write([]byte(suffixContext))
	mac.Write([]byte(apiKeyID))
	sum := mac.Sum(nil)
	const space = 36 * 36 * 36 * 36 * 36
	n := binary.BigEndian.Uint64(sum[:8]) % space
	s := strconv.FormatUint(n, 36)
	return strings.Repeat("0", SuffixLen-len(s)) + s
}

// LoginLabel proposes a token label for a login on site (a registrable
// domain, a host or a URL; package hostname reads it): the first DNS label of
// its registrable domain, sanitized to the label grammar by item.LoginLabel
// (github.com → github, https://www.bbc.co.uk/x → bbc). A name hostname
// refuses gets the default label. Two logins on one site collide; the
// caller appends -2, -3, ...
func LoginLabel(site string) string {
	h, err := hostname.Host(site)
	if err != nil {
		return item.LoginLabel("")
	}
	if rd, err := hostname.Registrable(h); err == nil {
		h = rd
	}
	return item.LoginLabel(h)
}
