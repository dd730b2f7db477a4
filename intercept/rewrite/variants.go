package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf16"
)

// ScrubVariants lists the forms in which a real value can come back from a
// site, each paired with the stand-in in the same form, for the proxy to turn
// into scan patterns (P10). The raw pair comes first; a form identical to one
// already listed is left out. The forms:
//   - URL-encoded, as url.QueryEscape and url.PathEscape write it, and with
//     lower-case hex digits;
//   - JSON string contents: encoding/json's output with and without its
//     HTML-safe \u003c \u003e \u0026, with "/" as "\/", and every character
//     as \uXXXX (lower- and upper-case hex);
//   - base64 of the value alone: standard and URL alphabets, padded and not;
//   - base64 of the value inside a larger base64 document (a Basic
//     credential "user:<value>", a JWT-like blob of JSON holding it), at
//     each of the three byte offsets a value can start at within a 3-byte
//     group: the characters that depend on the value's bytes only (see
//     base64Inner), standard and URL alphabets, and the standard one with
//     "/" JSON-escaped as "\/"; the same for the value JSON-escaped, when
//     the escaped stand-in has the escaped value's length (otherwise every
//     character after it would change);
//   - HTML: special characters as named, decimal and hex entities, and every
//     character as a decimal or hex numeric reference;
//   - JSON with every ASCII byte but letters as \u00XX (digits and symbols
//     escaped, words readable);
//   - upper-cased;
//   - for a card number (13 to 19 digits): the usual print groups (fours,
//     4-6-5 for 15 digits, 4-6-4 for 14) joined by a space, a dash, a space
//     URL-encoded ("+", "%20") or a non-breaking space (&nbsp;, &#160;,
//     \u00a0 escaped, or the UTF-8 character itself);
//   - UTF-16, little- and big-endian (a body declared UTF-16 is scanned as
//     bytes): the value, upper-cased, JSON-escaped, and a card number's
//     groups joined by a space, a dash or a non-breaking space.
//
// A value under 6 bytes (a CVV) is not listed inside a larger base64
// document: its 4 or 5 characters there are not bounded by anything and
// would be found by chance in any long base64 blob. Its UTF-16 forms are
// listed, and since every second byte of UTF-16 text is a zero, no word
// boundary can be told there: the caller matches them anywhere.
//
// The returned slices are fresh; the caller owns them and should wipe them
// when the session ends.
func ScrubVariants(real, standIn []byte) [][2][]byte {
	var out [][2][]byte
	seen := map[string]bool{}
	add := func(a, b []byte) {
		if len(a) == 0 || seen[string(a)] {
			return
		}
		seen[string(a)] = true
		out = append(out, [2][]byte{bytes.Clone(a), bytes.Clone(b)})
	}
	each := func(enc func([]byte) []byte) {
		add(enc(real), enc(standIn))
	}
	str := func(f func(string) string) func([]byte) []byte {
		return func(b []byte) []byte { return []byte(f(string(b))) }
	}

	add(real, standIn)
	each(str(url.QueryEscape))
	each(str(url.PathEscape))
	each(func(b []byte) []byte { return lowerPercent(url.QueryEscape(string(b))) })

	each(func(b []byte) []byte { return jsonEscape(b, true) })
	each(func(b []byte) []byte { return jsonEscape(b, false) })
	each(func(b []byte) []byte { return bytes.ReplaceAll(jsonEscape(b, true), []byte("/"), []byte(`\/`)) })
	each(func(b []byte) []byte { return allUnicodeEscapes(b, "%04x") })
	each(func(b []byte) []byte { return allUnicodeEscapes(b, "%04X") })
	each(func(b []byte) []byte { return nonLetterEscapes(b) })

	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		each(func(b []byte) []byte { return []byte(enc.EncodeToString(b)) })
	}

	// Inside a larger base64 stream only the characters made of the
	// value's bits alone can be swapped: the ones at either edge mix in
	// the neighbours' bits, and changing them would change the bytes
	// around the value. Value and stand-in have the same length, so at
	// one alignment both span the same characters.
	// A JSON document holds the value JSON-escaped; when the escaped
	// stand-in is as long as the escaped value, that form is listed too.
	for _, doc := range [][2][]byte{{real, standIn}, {jsonEscape(real, true), jsonEscape(standIn, true)}, {jsonEscape(real, false), jsonEscape(standIn, false)}} {
		if len(doc[0]) != len(doc[1]) {
			continue
		}
		for a := range 3 {
			for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
				r, s := base64Inner(enc, doc[0], a), base64Inner(enc, doc[1], a)
				if len(r) < minBase64Inner {
					continue
				}
				add(r, s)
				if enc == base64.RawStdEncoding {
					add(bytes.ReplaceAll(r, []byte("/"), []byte(`\/`)), bytes.ReplaceAll(s, []byte("/"), []byte(`\/`)))
				}
			}
		}
	}

	for _, style := range []entityStyle{entityNamed, entityDecimal, entityHex, entityGoHTML} {
		each(func(b []byte) []byte { return htmlSpecial(b, style) })
	}
	each(func(b []byte) []byte { return allNumericRefs(b, "&#%d;") })
	each(func(b []byte) []byte { return allNumericRefs(b, "&#x%x;") })

	// A page may print the value upper-cased (a CSS-less template, a
	// hex-like code); for digits this is the raw form again and is skipped.
	add(bytes.ToUpper(real), bytes.ToUpper(standIn))

	card := len(standIn) == len(real) && allDigits(standIn)
	if card {
		for _, groups := range cardGroups(real) {
			for _, sep := range []string{" ", "-", "+", "%20", "&nbsp;", "&#160;", `\u00a0`, "\u00a0"} {
				add(groupDigits(real, groups, sep), groupDigits(standIn, groups, sep))
			}
		}
	}

	for _, le := range []bool{true, false} {
		u16 := func(b []byte) []byte { return utf16Bytes(b, le) }
		each(u16)
		add(u16(bytes.ToUpper(real)), u16(bytes.ToUpper(standIn)))
		add(u16(jsonEscape(real, true)), u16(jsonEscape(standIn, true)))
		if card {
			for _, groups := range cardGroups(real) {
				for _, sep := range []string{" ", "-", "\u00a0"} {
					add(u16(groupDigits(real, groups, sep)), u16(groupDigits(standIn, groups, sep)))
				}
			}
		}
	}
	return out
}

// minBase64Inner is the fewest characters of a value inside a larger base64
// document worth matching: 6 characters are 36 bits of the value.
const minBase64Inner = 6

// base64Inner returns the characters of a base64 stream that hold v's bits
// and nothing else when v starts at byte a (0, 1 or 2) of a 3-byte group.
// Bit 8a is where v starts; character j spans bits 6j to 6j+5, so the
// characters from ceil(8a/6) up to (not including) floor((8a+8n)/6) are
// v's alone. enc must not pad.
func base64Inner(enc *base64.Encoding, v []byte, a int) []byte {
	buf := make([]byte, a+len(v))
	copy(buf[a:], v)
	s := enc.EncodeToString(buf)
	clear(buf)
	from, to := (8*a+5)/6, (8*a+8*len(v))/6
	if to <= from {
		return nil
	}
	return []byte(s[from:to])
}

// utf16Bytes encodes UTF-8 text as UTF-16 in the given byte order.
func utf16Bytes(b []byte, littleEndian bool) []byte {
	units := utf16.Encode([]rune(string(b)))
	out := make([]byte, 0, 2*len(units))
	for _, u := range units {
		if littleEndian {
			out = append(out, byte(u), byte(u>>8))
		} else {
			out = append(out, byte(u>>8), byte(u))
		}
	}
	return out
}

// nonLetterEscapes writes every ASCII byte other than a letter as a JSON
// \u00XX escape, the way some clients and templates escape digits and
// symbols while leaving words readable.
func nonLetterEscapes(b []byte) []byte {
	var sb strings.Builder
	for _, r := range string(b) {
		if r < 0x80 && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			fmt.Fprintf(&sb, `\u%04x`, r)
			continue
		}
		sb.WriteRune(r)
	}
	return []byte(sb.String())
}

func jsonEscape(b []byte, htmlSafe bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(htmlSafe)
	if err := enc.Encode(string(b)); err != nil {
		return nil
	}
	s := bytes.TrimSpace(buf.Bytes())
	return bytes.Clone(s[1 : len(s)-1])
}

func allUnicodeEscapes(b []byte, format string) []byte {
	var sb strings.Builder
	for _, r := range string(b) {
		if r > 0xffff {
			hi, lo := surrogates(r)
			fmt.Fprintf(&sb, `\u`+format+`\u`+format, hi, lo)
			continue
		}
		fmt.Fprintf(&sb, `\u`+format, r)
	}
	return []byte(sb.String())
}

func surrogates(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

type entityStyle int

const (
	entityNamed entityStyle = iota
	entityDecimal
	entityHex
	entityGoHTML // html.EscapeString: &amp; &lt; &gt; &#34; &#39;
)

var htmlNamed = map[rune]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&quot;", '\'': "&apos;"}
var htmlGo = map[rune]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&#34;", '\'': "&#39;"}

func htmlSpecial(b []byte, style entityStyle) []byte {
	var sb strings.Builder
	for _, r := range string(b) {
		if _, special := htmlNamed[r]; !special {
			sb.WriteRune(r)
			continue
		}
		switch style {
		case entityNamed:
			sb.WriteString(htmlNamed[r])
		case entityDecimal:
			fmt.Fprintf(&sb, "&#%d;", r)
		case entityHex:
			fmt.Fprintf(&sb, "&#x%x;", r)
		case entityGoHTML:
			sb.WriteString(htmlGo[r])
		}
	}
	return []byte(sb.String())
}

func allNumericRefs(b []byte, format string) []byte {
	var sb strings.Builder
	for _, r := range string(b) {
		fmt.Fprintf(&sb, format, r)
	}
	return []byte(sb.String())
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// cardGroups returns the print groupings of a card number, or nil when b is
// not one: the brand's own (Amex 4-6-5, Diners 4-6-4) first, then plain
// fours, and 4-6-5 for any 15-digit number, since pages differ.
func cardGroups(b []byte) [][]int {
	if !allDigits(b) || len(b) < 13 || len(b) > 19 {
		return nil
	}
	var fours []int
	for n := len(b); n > 0; n -= 4 {
		fours = append(fours, min(4, n))
	}
	switch len(b) {
	case 15:
		return [][]int{{4, 6, 5}, fours}
	case 14:
		return [][]int{{4, 6, 4}, fours}
	}
	return [][]int{fours}
}

func groupDigits(b []byte, groups []int, sep string) []byte {
	var out []byte
	for i, n := range groups {
		if i > 0 {
			out = append(out, sep...)
		}
		out = append(out, b[:n]...)
		b = b[n:]
	}
	return out
}

// lowerPercent lower-cases the hex digits of percent escapes.
func lowerPercent(s string) []byte {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLowerASCII(b[i+1])
			b[i+2] = toLowerASCII(b[i+2])
			i += 2
		}
	}
	return b
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
