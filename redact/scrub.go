package redact

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mask replaces whatever the scrubber removes. It holds no digit and no '@',
// so a replacement can never join its neighbours into a new card-, phone- or
// email-shaped string. When a filled value happens to be part of Mask
// ("ted"), one of altMasks is used instead.
const Mask = "[redacted]"

var altMasks = []string{Mask, "[hidden]", "***", "\u2026"}

const (
	// MaxErrorTextRunes is the longest error string an agent gets.
	MaxErrorTextRunes = 200
	// MaxErrorTexts is how many error strings an agent gets at most.
	MaxErrorTexts = 5
	// minDigitRun is the number of digits (with separators) from which a run
	// is treated as a card or phone number: 7 covers local phone numbers,
	// and every card number is longer.
	minDigitRun = 7
	// minFilledLen is the shortest filled value searched for: shorter values
	// ("1", a two-letter region code) would mask ordinary words and are not
	// secrets. Every secret field (card number, CVV, password, TOTP) is at
	// least three bytes.
	minFilledLen = 3
	// maxScrubInput bounds the work on a hostile page: text past it is
	// dropped before scanning (only 200 runes survive anyway).
	maxScrubInput = 16 << 10
)

// ScrubErrorText makes one piece of page text safe for an agent (P19): it
// removes the values this session filled and their stand-ins (filled), then
// anything token-shaped (av_...), email-shaped (x@y), and any run of 7 or
// more digits joined by spaces, dashes, dots, slashes or brackets (card
// numbers with or without Luhn, phone numbers with +country), each replaced
// by Mask. Whitespace is collapsed and the result cut to 200 runes. If a
// filled value or a shape survives all that, the result is empty: the
// scrubber fails closed.
func ScrubErrorText(s string, filled [][]byte) string {
	vals := usable(filled)
	mask := chooseMask(vals)
	if mask == "" {
		return ""
	}
	if len(s) > maxScrubInput {
		s = s[:maxScrubInput]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = removeFilled(s, vals, mask)
	// Collapse whitespace and drop invisible format characters before
	// looking for shapes, so "4111\u200b1111..." or a number split across
	// lines is seen whole; then look for the filled values again.
	s = collapseSpace(s)
	s = removeFilled(s, vals, mask)
	s = maskTokens(s, mask)
	s = maskEmails(s, mask)
	s = maskDigitRuns(s, mask)
	s = cutRunes(s, MaxErrorTextRunes)
	if leaks(s, vals) {
		return ""
	}
	return s
}

// chooseMask picks the first mask no filled value is part of.
func chooseMask(vals [][]byte) string {
next:
	for _, m := range altMasks {
		lm := asciiLower(m)
		for _, v := range vals {
			if strings.Contains(lm, asciiLower(string(v))) {
				continue next
			}
		}
		return m
	}
	return ""
}

// ErrorTexts scrubs and cuts each text, drops those left empty, and keeps at
// most five.
func ErrorTexts(in []string, filled [][]byte) []string {
	out := make([]string, 0, min(len(in), MaxErrorTexts))
	for _, s := range in {
		if len(out) == MaxErrorTexts {
			break
		}
		if t := ScrubErrorText(s, filled); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// removeFilled replaces every occurrence of each filled value, ignoring
// ASCII case, longest values first so a stand-in that contains a shorter
// value is removed whole.
func removeFilled(s string, vals [][]byte, mask string) string {
	for _, v := range vals {
		s = replaceFold(s, string(v), mask)
	}
	return s
}

func usable(filled [][]byte) [][]byte {
	vals := make([][]byte, 0, len(filled))
	for _, v := range filled {
		if len(bytes.TrimSpace(v)) >= minFilledLen {
			vals = append(vals, v)
		}
	}
	// Longest first.
	for i := 1; i < len(vals); i++ {
		for j := i; j > 0 && len(vals[j]) > len(vals[j-1]); j-- {
			vals[j], vals[j-1] = vals[j-1], vals[j]
		}
	}
	return vals
}

// replaceFold replaces v in s, matching ASCII letters without regard to
// case. Lower-casing only ASCII keeps byte offsets aligned between s and its
// folded copy.
func replaceFold(s, v, mask string) string {
	ls, lv := asciiLower(s), asciiLower(v)
	if !strings.Contains(ls, lv) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(ls, lv)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(mask)
		s, ls = s[i+len(v):], ls[i+len(v):]
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// maskTokens masks "av_" and "avk_" followed by token characters: mock
// tokens and API keys. The prefix is matched in any case.
func maskTokens(s, mask string) string {
	ls := asciiLower(s)
	var b strings.Builder
	i := 0
	for i < len(s) {
		j := strings.Index(ls[i:], "av")
		if j < 0 {
			break
		}
		j += i
		k := j + 2
		if k < len(ls) && ls[k] == 'k' {
			k++
		}
		if k < len(ls) && (ls[k] == '_' || strings.HasPrefix(ls[k:], "%5f")) {
			end := k
			for end < len(s) && (isTokenByte(s[end]) || strings.HasPrefix(ls[end:], "%5f")) {
				if s[end] == '%' {
					end += 3
				} else {
					end++
				}
			}
			b.WriteString(s[i:j])
			b.WriteString(mask)
			i = end
			continue
		}
		b.WriteString(s[i : j+2])
		i = j + 2
	}
	b.WriteString(s[i:])
	return b.String()
}

func isTokenByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// maskEmails masks every word that contains '@' with something on both
// sides. This is broader than RFC 5322 on purpose: "a@b" in an error is more
// likely an address than anything an agent needs.
func maskEmails(s, mask string) string {
	if !strings.ContainsAny(s, "@＠") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		at := strings.IndexAny(s, "@＠")
		if at < 0 {
			break
		}
		start := at
		for start > 0 {
			r, n := utf8.DecodeLastRuneInString(s[:start])
			if isEmailBoundary(r) {
				break
			}
			start -= n
		}
		_, atLen := utf8.DecodeRuneInString(s[at:])
		end := at + atLen
		for end < len(s) {
			r, n := utf8.DecodeRuneInString(s[end:])
			if isEmailBoundary(r) {
				break
			}
			end += n
		}
		if start == at || end == at+atLen {
			// Nothing on one side: a lone '@' is not an address.
			b.WriteString(s[:end])
			s = s[end:]
			continue
		}
		b.WriteString(s[:start])
		b.WriteString(mask)
		s = s[end:]
	}
	b.WriteString(s)
	return b.String()
}

func isEmailBoundary(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune("<>()[]{}\"',;:!?`", r)
}

// maxDigitSeps is how many separators in a row still join two digit groups:
// "4111 - 1111" has three.
const maxDigitSeps = 3

// maskDigitRuns masks runs that hold at least minDigitRun digits (any
// script's decimal digits), joined by at most three separators at a time
// (anything that is neither a letter nor a digit): "4111 1111 1111 1111",
// "4111-1111-1111-1111", "+49 (30) 1234-5678".
func maskDigitRuns(s, mask string) string {
	rs := []rune(s)
	var b strings.Builder
	i := 0
	for i < len(rs) {
		if !unicode.IsDigit(rs[i]) {
			b.WriteRune(rs[i])
			i++
			continue
		}
		start := i
		if start > 0 && rs[start-1] == '+' {
			start-- // already written; handled below
		}
		end, digits, seps := i, 0, 0
		j := i
		for j < len(rs) {
			switch {
			case unicode.IsDigit(rs[j]):
				digits++
				seps = 0
				j++
				end = j
				continue
			case isDigitSep(rs[j]) && seps < maxDigitSeps:
				seps++
				j++
				continue
			}
			break
		}
		if digits >= minDigitRun {
			if start < i {
				// drop the '+' written just before
				str := b.String()
				b.Reset()
				b.WriteString(strings.TrimSuffix(str, "+"))
			}
			b.WriteString(mask)
		} else {
			b.WriteString(string(rs[i:end]))
		}
		i = end
	}
	return b.String()
}

func isDigitSep(r rune) bool {
	return !unicode.IsLetter(r) && !unicode.IsDigit(r)
}

func collapseSpace(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			continue // zero-width and direction marks: invisible, dropped
		}
		if unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// cutRunes cuts s to at most n runes, never inside a rune.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n; k++ {
		_, sz := utf8.DecodeRuneInString(s[i:])
		i += sz
	}
	return s[:i]
}

// leaks is the final check: true if s still holds a filled value or a shape
// the scrubber removes.
func leaks(s string, vals [][]byte) bool {
	ls := asciiLower(s)
	for _, v := range vals {
		if strings.Contains(ls, asciiLower(string(v))) {
			return true
		}
	}
	return HasSensitiveShape(s)
}

// HasSensitiveShape reports whether s holds something token-, email-, card-
// or phone-shaped, as ScrubErrorText defines them.
func HasSensitiveShape(s string) bool {
	return maskTokens(s, Mask) != s || maskEmails(s, Mask) != s || maskDigitRuns(s, Mask) != s
}
