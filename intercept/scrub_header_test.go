package intercept

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/vault"
)

// The response header is scanned once as a whole (headerClean) and field by
// field (scrubFields) only when that scan finds something. These tests hold
// the one scan to the per-field one: whatever scrubFields replaces, the one
// scan must have found (issue 12; P10).

func TestP10_HeaderOnePassTriggersFieldScrub(t *testing.T) {
	sc := testScrubber()
	number := strings.Repeat("4242", 4)
	cases := []struct {
		name   string
		h      http.Header
		reason string
		dirty  bool
		want   http.Header // after scrubHeader; nil: unchanged
	}{
		{"nothing", http.Header{"Content-Type": {"text/html"}, "X-N": {"17375"}}, "OK", false, nil},
		{"value", http.Header{"X-Ref": {"paid with " + number}}, "", true,
			http.Header{"X-Ref": {"paid with 4242420000004242"}}},
		{"short value is a whole field", http.Header{"X-A": {"ok"}, "X-Cvv": {"737"}}, "", true,
			http.Header{"X-A": {"ok"}, "X-Cvv": {"123"}}},
		{"short value at a line's start and end only", http.Header{"X-A": {"1737"}, "X-B": {"7371"}}, "", false, nil},
		{"name", http.Header{"X-Card-" + number: {"1"}}, "", true,
			http.Header{"X-Card-4242420000004242": {"1"}}},
		// The name holds the value with its case changed, as Go's
		// canonical form does: only the upper-cased scan sees it.
		{"name by case only", http.Header{"X-Pw-P&ss W0rd": {"2"}, "X-Plain": {"ok"}}, "", true,
			http.Header{"X-Plain": {"ok"}}}, // "X-Pw-Q#tt X1sf" is no valid field name: dropped
		{"second value", http.Header{"Set-Cookie": {"a=1", "cc=" + number}}, "", true,
			http.Header{"Set-Cookie": {"a=1", "cc=4242420000004242"}}},
		{"reason phrase", http.Header{"X-A": {"ok"}}, "Card " + number + " accepted", true, nil},
		// Split across two fields: per field it is no value, so the
		// one scan must not see it either (a false alarm would only cost
		// time, but the line break must keep the fields apart).
		{"split across fields", http.Header{"X-A": {number[:8]}}, number[8:], false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := !headerClean(sc, tc.h, tc.reason); got != tc.dirty {
				t.Fatalf("one scan found a value: %v, want %v", got, tc.dirty)
			}
			if tc.reason != "" {
				return
			}
			h, hits := cloneHeader(tc.h), 0
			scrubHeader(sc, h, func(vault.Kind) { hits++ })
			want := tc.want
			if want == nil {
				want = tc.h
			}
			if !sameHeader(h, want) {
				t.Fatalf("scrubbed to %q, want %q", h, want)
			}
			if (hits > 0) != tc.dirty {
				t.Fatalf("%d replacements", hits)
			}
		})
	}
}

// FuzzP10_HeaderOnePassAgreesWithFields checks, for any header, that the
// one scan finds a value whenever the per-field scrub replaces one. The
// input is split on '\x00' into name, value, name, value...
func FuzzP10_HeaderOnePassAgreesWithFields(f *testing.F) {
	number := strings.Repeat("4242", 4)
	for _, s := range []string{
		"X-A\x00737", "X-A\x0017375", "X-Card-" + number + "\x001", "X-P&ss W0rd\x00x",
		"X-A\x00" + number[:8] + "\x00X-B\x00" + number[8:], "X-A\x00a\x00X-A\x00p&ss w0rd",
		"\x00737", "X-A\x00cGomc3MgdzByZA==", "X-A\x00P&amp;SS W0RD", "x\x00" + number + "\n737",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkOnePass(t, testScrubber(), headerOf(s))
	})
}

// TestP10_HeaderOnePassAgreesWithFieldsRandom runs the fuzz property on
// headers built at random from the test values, their variants and
// fragments, and ordinary header text.
func TestP10_HeaderOnePassAgreesWithFieldsRandom(t *testing.T) {
	sc := testScrubber()
	number := strings.Repeat("4242", 4)
	bits := []string{number, number[:7], number[7:], "737", "p&ss w0rd", "P&SS W0RD", "P&ss W0rd", "p%26ss+w0rd",
		"4242 4242 4242 4242", "cCZzcyB3MHJk", "x", "-", " ", ";", "=", "1", "7", "a", "\n", "\t", "é", "\xff",
		"Content-Type", "text/html", "max-age=0"}
	rnd := rand.New(rand.NewPCG(12, 0))
	pick := func() string {
		var b strings.Builder
		for range rnd.IntN(4) {
			b.WriteString(bits[rnd.IntN(len(bits))])
		}
		return b.String()
	}
	for range 3000 {
		var parts []string
		for range 1 + rnd.IntN(4) {
			parts = append(parts, pick(), pick())
		}
		checkOnePass(t, sc, headerOf(strings.Join(parts, "\x00")))
	}
}

func checkOnePass(t *testing.T, sc *scrubber, h http.Header) {
	t.Helper()
	clean := headerClean(sc, h, "")
	got, hits := cloneHeader(h), 0
	scrubFields(sc, got, func(vault.Kind) { hits++ })
	if clean && (hits > 0 || !sameHeader(got, h)) {
		t.Fatalf("one scan missed what the per-field scrub replaced in %q", h)
	}
}

func headerOf(s string) http.Header {
	parts := strings.Split(s, "\x00")
	h := http.Header{}
	for i := 0; i < len(parts); i += 2 {
		v := ""
		if i+1 < len(parts) {
			v = parts[i+1]
		}
		h[parts[i]] = append(h[parts[i]], v)
	}
	return h
}

func cloneHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	return h.Clone()
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		ws, ok := b[k]
		if !ok || len(ws) != len(vs) {
			return false
		}
		for i := range vs {
			if vs[i] != ws[i] {
				return false
			}
		}
	}
	return true
}
