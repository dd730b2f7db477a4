package rewrite

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

// naiveReplacer is the test stand-in for tokens.Replacer: values shorter than
// 8 bytes match only a whole field, longer ones match anywhere. A value equal
// to forbidden makes it fail, as a token out of scope would.
type naiveReplacer struct {
	pairs     [][2]string
	forbidden string
}

const shortValue = 8

func (n naiveReplacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	for _, p := range n.pairs {
		if len(p[0]) < shortValue && string(src) == p[0] {
			return append(dst, p[1]...), 1, nil
		}
	}
	return n.ReplaceText(dst, src)
}

func (n naiveReplacer) ReplaceText(dst, src []byte) ([]byte, int, error) {
	s := string(src)
	if n.forbidden != "" && strings.Contains(s, n.forbidden) {
		return nil, 0, agentvault.Errorf(agentvault.CodeTokenNotAllowed, "token not allowed here")
	}
	count := 0
	for _, p := range n.pairs {
		if len(p[0]) >= shortValue {
			if c := strings.Count(s, p[0]); c > 0 {
				s = strings.ReplaceAll(s, p[0], p[1])
				count += c
			}
		}
	}
	return append(dst, s...), count, nil
}

// Test values: mock tokens and stand-ins on the left, what they stand for on
// the right. None is a real secret.
const (
	tokNumber  = "av_card_1_number_u7x2k"
	realNumber = "4111111111111111"
	tokCVV     = "av_card_1_cvv_u7x2k"
	standInCVV = "123"
	realCVV    = "737"
	standInPW  = "Xk9pQ2rTzz"
	realPW     = `p@ss/w<rd>&"x'y`
	tokForbid  = "av_login_evil_password_u7x2k"
)

func testReplacer() naiveReplacer {
	return naiveReplacer{
		pairs: [][2]string{
			{tokNumber, realNumber},
			{tokCVV, realCVV},
			{standInCVV, realCVV},
			{standInPW, realPW},
		},
		forbidden: tokForbid,
	}
}

func mustBase64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// realFixtures are the test values that play real secrets; show hides them.
var realFixtures = []string{realNumber, realPW, "REAL<&>\"\\/\u2028é+ ;", "x\"y&=%\\"}

// show formats v for a failure message with every real-value fixture
// replaced by its length, so a failing test prints no secret (P11), test
// fixtures included.
func show(v any) string {
	var s string
	switch x := v.(type) {
	case []byte:
		s = string(x)
	case string:
		s = x
	default:
		s = fmt.Sprintf("%+v", x)
	}
	for _, r := range realEncodings() {
		s = strings.ReplaceAll(s, r, fmt.Sprintf("<real:%d>", len(r)))
	}
	return strconv.Quote(s)
}

// realEncodings lists the fixtures in every encoding ScrubVariants knows,
// longest first.
var realEncodings = sync.OnceValue(func() []string {
	var out []string
	for _, r := range realFixtures {
		for _, v := range ScrubVariants([]byte(r), []byte(r)) {
			out = append(out, string(v[0]))
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
})

func TestP11_ShowHidesFixtures(t *testing.T) {
	for _, s := range []string{realNumber, "4111 1111 1111 1111", url.QueryEscape(realPW), base64.StdEncoding.EncodeToString([]byte(realPW))} {
		if out := show("x" + s + "y"); strings.Contains(out, s) || !strings.Contains(out, "<real:") {
			t.Fatalf("show leaks a fixture encoding of %d bytes", len(s))
		}
	}
}
