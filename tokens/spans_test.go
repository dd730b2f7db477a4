package tokens

import (
	"fmt"
	"slices"
	"testing"
)

func TestSpansAndOpenPrefixes(t *testing.T) {
	m := NewMatcher([]Pattern{
		{Value: []byte("4242424242424242"), ID: 0},
		{Value: []byte("737"), ID: 1, WholeField: true, WordBounded: true},
		{Value: []byte("secret"), ID: 2},
	})
	for _, tc := range []struct {
		src   string
		from  int
		spans []Span
		open  []string // "start:id"
	}{
		{"a 4242424242424242 b 737.", 0, []Span{{2, 18, 0}, {21, 24, 1}}, nil},
		{"x17375 secrets", 0, []Span{{7, 13, 2}}, []string{"13:2"}}, // "s" could begin "secret"
		{"secret 737", 7, []Span{{7, 10, 1}}, nil},                  // "7" after "3" cannot begin a CVV
		{"card 42424", 0, nil, []string{"5:0", "7:0", "9:0"}},
		{"v73", 0, nil, nil},            // no word boundary before "73"
		{"73", 0, nil, []string{"0:1"}}, // the start of src counts as one
		{"sec", 1, nil, nil},            // before from
	} {
		t.Run(tc.src, func(t *testing.T) {
			got := m.Spans(nil, []byte(tc.src), tc.from)
			if !slices.Equal(got, tc.spans) {
				t.Fatalf("Spans = %v, want %v", got, tc.spans)
			}
			var open []string
			m.OpenPrefixes([]byte(tc.src), tc.from, func(s, id int) { open = append(open, fmt.Sprintf("%d:%d", s, id)) })
			slices.Sort(open)
			if !slices.Equal(open, tc.open) {
				t.Fatalf("OpenPrefixes = %v, want %v", open, tc.open)
			}
			// Spans finds what ReplaceText replaces.
			r := NewReplacer(m, func(id int) ([]byte, error) { return []byte("<>"), nil })
			_, n, _ := r.ReplaceText(nil, []byte(tc.src))
			if tc.from == 0 && n != len(got) {
				t.Fatalf("ReplaceText replaced %d, Spans found %d", n, len(got))
			}
		})
	}
}
