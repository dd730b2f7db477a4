package rewrite

import (
	"strings"
	"testing"
)

func TestP9_EncodedViewsExposeHiddenTokens(t *testing.T) {
	cases := map[string]string{
		"xml entity":          "<n>&#97;v_card_1_number_u7x2k</n>",
		"json in text":        `note: {"n":"\u0061v_card_1_number_u7x2k"}`,
		"percent in text":     "see av%5Fcard%5F1%5Fnumber%5Fu7x2k",
		"json inside a form":  "data=%7B%22n%22%3A%22%5Cu0061v_card_1_number_u7x2k%22%7D",
		"html named entities": "x&lt;av_card_1_number_u7x2k&gt;",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			found := strings.Contains(body, tokNumber)
			for _, v := range EncodedViews([]byte(body)) {
				found = found || strings.Contains(string(v), tokNumber)
			}
			if !found {
				t.Fatal("token not visible in any view")
			}
		})
	}
	if v := EncodedViews([]byte("plain text")); len(v) != 0 {
		t.Fatalf("%d views of text with nothing to decode", len(v))
	}
}

func TestP9_DecodeMatchesBody(t *testing.T) {
	plain := []byte(`{"a":"` + tokNumber + `"}`)
	got, err := Decode("zstd, gzip", compress(t, "gzip", compress(t, "zstd", plain)), 0)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Decode: %v", err)
	}
}
