package tokens_test

import (
	"bytes"
	"fmt"

	"github.com/agentvault/agentvault/tokens"
)

// A request body carries a token and a CVV stand-in; the replacer swaps both
// for what the bindings resolve to. The short stand-in is WholeField, so the
// same digits inside a longer number stay as they are.
func ExampleReplacer() {
	m := tokens.NewMatcher([]tokens.Pattern{
		{Value: []byte("av_card_1_number_u7x2k"), ID: 1},
		{Value: []byte("482"), ID: 2, WholeField: true},
	})
	resolved := map[int][]byte{1: []byte("<number>"), 2: []byte("<cvv>")}
	r := tokens.NewReplacer(m, func(id int) ([]byte, error) { return resolved[id], nil })

	out, n, err := r.ReplaceText(nil, []byte(`{"pan":"av_card_1_number_u7x2k","cvc":"482","zip":"94821"}`))
	fmt.Println(string(out), n, err)

	var buf bytes.Buffer
	w := r.NewWriter(&buf)
	w.Write([]byte("pan=av_card_1_num"))
	w.Write([]byte("ber_u7x2k&cvc=48"))
	w.Write([]byte("2"))
	w.Close()
	fmt.Println(buf.String())
	// Output:
	// {"pan":"<number>","cvc":"<cvv>","zip":"94821"} 2 <nil>
	// pan=<number>&cvc=<cvv>
}

func ExampleParse() {
	t, err := tokens.Parse("av_address_1_postal_code_u7x2k")
	fmt.Println(t.Kind, t.Label, t.Field, t.Suffix, err)
	// Output: address 1 postal_code u7x2k <nil>
}
