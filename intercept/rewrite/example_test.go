package rewrite_test

import (
	"fmt"

	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
)

// The proxy's request path: a tokens.Replacer maps what the browser typed to
// the real values, and Body puts them in place inside the JSON.
func ExampleBody() {
	typed := []tokens.Pattern{{Value: []byte("av_card_1_cvv_u7x2k"), ID: 0}}
	real := [][]byte{[]byte("737")}
	r := tokens.NewReplacer(tokens.NewMatcher(typed), func(id int) ([]byte, error) { return real[id], nil })

	out, n, err := rewrite.Body("application/json", "", []byte(`{"cvc":"\u0061v_card_1_cvv_u7x2k"}`), r, 1<<20)
	fmt.Println(string(out), n, err)
	// Output: {"cvc":"737"} 1 <nil>
}

// The response path: every encoding of a released value becomes a pattern
// of the scrubbing replacer, mapped to the stand-in in the same encoding.
func ExampleScrubVariants() {
	variants := rewrite.ScrubVariants([]byte("4111111111111111"), []byte("4111119999991111"))
	pats := make([]tokens.Pattern, len(variants))
	for i, v := range variants {
		pats[i] = tokens.Pattern{Value: v[0], ID: i}
	}
	scrub := tokens.NewReplacer(tokens.NewMatcher(pats), func(id int) ([]byte, error) { return variants[id][1], nil })

	page := []byte(`<p>Card 4111 1111 1111 1111 saved</p>`)
	out, n, err := rewrite.ScrubBody("text/html", "", page, scrub, 1<<20)
	fmt.Println(string(out), n, err)
	// Output: <p>Card 4111 1199 9999 1111 saved</p> 1 <nil>
}
