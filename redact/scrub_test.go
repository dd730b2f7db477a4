package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var scrubCases = []struct {
	name   string
	in     string
	filled []string
	want   string
}{
	{"plain message kept", "Enter a valid postcode", nil, "Enter a valid postcode"},
	{"short numbers kept", "Only 3 left, max 12 per order", nil, "Only 3 left, max 12 per order"},
	{"card spaced", "Card 4111 1111 1111 1111 was declined", nil, "Card [redacted] was declined"},
	{"card dashed", "4111-1111-1111-1111 is invalid", nil, "[redacted] is invalid"},
	{"card plain non-luhn", "number 1234567812345678 bad", nil, "number [redacted] bad"},
	{"card spaced dashes", "4111 - 1111 - 1111 - 1111", nil, "[redacted]"},
	{"amex groups", "3782 822463 10005 rejected", nil, "[redacted] rejected"},
	{"card zero width", "4111\u200b1111\u200b1111\u200b1111!", nil, "[redacted]!"},
	{"card across lines", "4111\n1111\n1111\n1111", nil, "[redacted]"},
	{"fullwidth digits", "４１１１１１１１１１１１１１１１", nil, "[redacted]"},
	{"phone international", "Call +49 (30) 1234-5678 now", nil, "Call [redacted] now"},
	{"phone us", "Phone (555) 123-4567 invalid", nil, "Phone ([redacted] invalid"},
	{"email", "jane.doe+shop@example.co.uk is taken", nil, "[redacted] is taken"},
	{"email in brackets", "Account <bob@x.io> exists", nil, "Account <[redacted]> exists"},
	{"lone at kept", "Pay @ the counter", nil, "Pay @ the counter"},
	{"token", "Unknown value av_card_1_number_u7x2k here", nil, "Unknown value [redacted] here"},
	{"token upper", "AV_LOGIN_GITHUB_PASSWORD_U7X2K", nil, "[redacted]"},
	{"api key", "key avk_abc123 revoked", nil, "key [redacted] revoked"},
	{"filled value", "Password hunter2xyz is too weak", []string{"hunter2xyz"}, "Password [redacted] is too weak"},
	{"filled value any case", "Name JOHN SMITH rejected", []string{"John Smith"}, "Name [redacted] rejected"},
	{"filled cvv", "CVC 737 wrong", []string{"737"}, "CVC [redacted] wrong"},
	{"short filled ignored", "Region CA unsupported", []string{"CA"}, "Region CA unsupported"},
	{"stand-in removed", "Card 4111119876541111 declined", []string{"4111119876541111"}, "Card [redacted] declined"},
	{"whitespace collapsed", "  Enter\n\ta   postcode  ", nil, "Enter a postcode"},
	{"empty", "   ", nil, ""},
	{"invalid utf8", "bad \xff text", nil, "bad \uFFFD text"},
}

func bytesOf(ss []string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

func TestP19_ScrubErrorText(t *testing.T) {
	for _, tc := range scrubCases {
		t.Run(tc.name, func(t *testing.T) {
			got := ScrubErrorText(tc.in, bytesOf(tc.filled))
			if got != tc.want {
				t.Fatalf("got %q (%d bytes), want %q", got, len(got), tc.want)
			}
		})
	}
}

func TestP19_ScrubCutsRuneSafe(t *testing.T) {
	in := strings.Repeat("é", 300)
	got := ScrubErrorText(in, nil)
	if n := utf8.RuneCountInString(got); n != MaxErrorTextRunes || !utf8.ValidString(got) {
		t.Fatalf("cut to %d runes, valid=%v", n, utf8.ValidString(got))
	}
}

func TestP19_ScrubFailsClosed(t *testing.T) {
	// A filled value that reappears around the mask itself ("ted]x" inside
	// "[redacted]x") cannot be removed by replacement: the whole text goes.
	got := ScrubErrorText("ted]xyz", bytesOf([]string{"ted]x"}))
	if strings.Contains(got, "ted]x") {
		t.Fatalf("filled value survived: %d bytes", len(got))
	}
	// A filled value that is part of the mask gets another mask.
	if got := ScrubErrorText("code ted is wrong", bytesOf([]string{"ted"})); got != "code [hidden] is wrong" {
		t.Fatalf("got %q", got)
	}
}

func TestP19_ErrorTexts(t *testing.T) {
	in := []string{"", "Enter a valid postcode", "   ", "Card 4111 1111 1111 1111 declined", "a", "b", "c", "d", "e"}
	got := ErrorTexts(in, nil)
	want := []string{"Enter a valid postcode", "Card [redacted] declined", "a", "b", "c"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := ErrorTexts(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("nil input: %#v", got)
	}
}

func FuzzScrubErrorText(f *testing.F) {
	for _, tc := range scrubCases {
		filled := ""
		if len(tc.filled) > 0 {
			filled = tc.filled[0]
		}
		f.Add(tc.in, filled)
	}
	f.Add("ted]xyz", "ted]x")
	f.Add("x@[redacted].com", "")
	f.Fuzz(func(t *testing.T, s, filled string) {
		var fl [][]byte
		if filled != "" {
			fl = [][]byte{[]byte(filled)}
		}
		got := ScrubErrorText(s, fl)
		if n := utf8.RuneCountInString(got); n > MaxErrorTextRunes {
			t.Fatalf("output has %d runes", n)
		}
		if !utf8.ValidString(got) {
			t.Fatal("output is not valid UTF-8")
		}
		if HasSensitiveShape(got) {
			t.Fatalf("output still holds a sensitive shape (%d bytes)", len(got))
		}
		if len(strings.TrimSpace(filled)) >= minFilledLen && strings.Contains(asciiLower(got), asciiLower(filled)) {
			t.Fatalf("output still holds the filled value (%d bytes)", len(filled))
		}
		// Naive reference: no run of 7+ ASCII digits, no av_ token.
		digits := 0
		for _, r := range got {
			if r >= '0' && r <= '9' {
				digits++
				if digits >= minDigitRun {
					t.Fatal("output holds 7 consecutive digits")
				}
			} else {
				digits = 0
			}
		}
		if strings.Contains(asciiLower(got), "av_") {
			t.Fatal("output holds a token prefix")
		}
	})
}
