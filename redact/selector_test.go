package redact

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
)

var selectorCases = []struct {
	sel  string
	code agentvault.Code // "" allowed
}{
	// Structural selectors, digits or not, stay allowed.
	{"#card-1", ""},
	{".step-2 input", ""},
	{"input[name='cardnumber']", ""},
	{"input[name=cc-exp-1]", ""},
	{"input[type=tel]", ""},
	{"[data-testid=\"pay-button-2\"]", ""},
	{"form > div:nth-child(3) input", ""},
	{"iframe[title='Secure payment input frame']", ""},
	{"button:has-text(\"Pay now\")", ""},
	{"text=Place order", ""},
	{"\"Continue\"", ""},
	{"#checkout >> text=Pay", ""},
	{"aria-ref=e12", ""},
	{"id=card-number-1", ""},
	{"data-testid=submit-3", ""},
	{"css=#pay >> nth=1", ""},
	{"input:placeholder-shown", ""},
	{"//button[@type='submit']", ""},
	{"xpath=//div[2]/input", ""},
	{"//button[contains(., 'Pay')]", ""},
	{"internal:has-text=\"Pay\"i", ""},
	{"internal:role=button[name=\"Pay\"i]", ""},
	{"[aria-label='Card number']", ""},
	{"input:not([disabled])", ""},
	{".value-prop", ""},

	// Value tests.
	{"input[value='4111111111111111']", agentvault.CodeSensitiveDataBlocked},
	{"input[value]", agentvault.CodeSensitiveDataBlocked},
	{"input[VALUE^='4']", agentvault.CodeSensitiveDataBlocked},
	{"input[ value *= 'x' ]", agentvault.CodeSensitiveDataBlocked},
	{"[aria-valuetext='12']", agentvault.CodeSensitiveDataBlocked},
	{"[aria-valuenow]", agentvault.CodeSensitiveDataBlocked},
	{"[data-value=abc]", agentvault.CodeSensitiveDataBlocked},
	{"input[v\\61lue='x']", agentvault.CodeSensitiveDataBlocked},
	{"internal:attr=[value=\"4111\"]", agentvault.CodeSensitiveDataBlocked},
	{"internal:attr=[placeholder=\"4242\"]", agentvault.CodeSensitiveDataBlocked},
	{"_react=CardInput[value='4']", agentvault.CodeSensitiveDataBlocked},
	{"//input[@value='4111']", agentvault.CodeSensitiveDataBlocked},
	{"//input[@value]", agentvault.CodeSensitiveDataBlocked},
	{"//input[ @ value ]", agentvault.CodeSensitiveDataBlocked},
	{"input:not([value=''])", agentvault.CodeSensitiveDataBlocked},

	// Digits in text matches.
	{"span:has-text('4242')", agentvault.CodeSensitiveDataBlocked},
	{"span:HAS-TEXT('4242')", agentvault.CodeSensitiveDataBlocked},
	{"span:has-text('\\34 242')", agentvault.CodeSensitiveDataBlocked},
	{"span:text('1')", agentvault.CodeSensitiveDataBlocked},
	{"span:text-is('ends 1111')", agentvault.CodeSensitiveDataBlocked},
	{"div:has-not-text('4')", agentvault.CodeSensitiveDataBlocked},
	{"text=4242", agentvault.CodeSensitiveDataBlocked},
	{"text=\"Card ending 4242\"", agentvault.CodeSensitiveDataBlocked},
	{"'4242'", agentvault.CodeSensitiveDataBlocked},
	{"#a >> text=1", agentvault.CodeSensitiveDataBlocked},
	{">> internal:has-text=\"4\"", agentvault.CodeSensitiveDataBlocked},
	{"div >> internal:has-text=\"4\"i", agentvault.CodeSensitiveDataBlocked},
	{"internal:text=\"\\u0034\"", agentvault.CodeSensitiveDataBlocked},
	{"internal:label=\"Card 4\"", agentvault.CodeSensitiveDataBlocked},
	{"role=textbox[name=\"4242\"]", agentvault.CodeSensitiveDataBlocked},
	{"p:-soup-contains('4242')", agentvault.CodeSensitiveDataBlocked},
	{"p:contains('4242')", agentvault.CodeSensitiveDataBlocked},
	{"[aria-label*='4242']", agentvault.CodeSensitiveDataBlocked},
	{"[title$='1111']", agentvault.CodeSensitiveDataBlocked},
	{"text=\"a >> 4242\"", agentvault.CodeSensitiveDataBlocked},
	{"internal:has=\"text=4242\"", agentvault.CodeSensitiveDataBlocked},
	{"div >> internal:has=\"span:has-text('1')\"", agentvault.CodeSensitiveDataBlocked},

	// Regular expressions on text, digits or not.
	{"text=/\\d{4}/", agentvault.CodeSensitiveDataBlocked},
	{"text=/^....$/", agentvault.CodeSensitiveDataBlocked},
	{"span:text-matches('[0-9]')", agentvault.CodeSensitiveDataBlocked},
	{"span:text-matches('abc')", agentvault.CodeSensitiveDataBlocked},
	{"internal:text=/x/", agentvault.CodeSensitiveDataBlocked},
	{"internal:role=textbox[name=/4/]", agentvault.CodeSensitiveDataBlocked},

	{"internal:role=button[name=/^....$/]", agentvault.CodeSensitiveDataBlocked},
	{"role=button[name=/pay/i]", agentvault.CodeSensitiveDataBlocked},

	// Capture marks and backtick quoting cannot hide a text match.
	{"*text=4242", agentvault.CodeSensitiveDataBlocked},
	{"div >> *text=\"1\"", agentvault.CodeSensitiveDataBlocked},
	{"*css=div >> text=Pay", ""},
	{"text=`a >> 4242`", agentvault.CodeSensitiveDataBlocked},

	// XPath reading text.
	{"//span[text()='4242']", agentvault.CodeSensitiveDataBlocked},
	{"//span[contains(text(), '4')]", agentvault.CodeSensitiveDataBlocked},
	{"//span[.='4242']", agentvault.CodeSensitiveDataBlocked},
	{"//span[starts-with(normalize-space(.), '4')]", agentvault.CodeSensitiveDataBlocked},
	{"//span[string-length(.)=16]", agentvault.CodeSensitiveDataBlocked},
	{"//span[number(.) > 4000]", agentvault.CodeSensitiveDataBlocked},
	{"//span[translate(., 'abc', '')='x']", agentvault.CodeSensitiveDataBlocked},
	{"xpath=//span[contains(., \"1\")]", agentvault.CodeSensitiveDataBlocked},
	{"//div[@id='card-1']", agentvault.CodeSensitiveDataBlocked},

	// Unknown engines and malformed selectors fail closed.
	{"myengine=4242", agentvault.CodeSensitiveDataBlocked},
	{"span:has-text('4", agentvault.CodeSensitiveDataBlocked},
	{"text=\"a", agentvault.CodeSensitiveDataBlocked},
	{"[name='x'", agentvault.CodeSensitiveDataBlocked},
	{"", agentvault.CodeInvalidParams},
}

func TestP19_CheckSelectorAfterFill(t *testing.T) {
	for _, tc := range selectorCases {
		t.Run(tc.sel, func(t *testing.T) {
			err := CheckSelectorAfterFill(tc.sel)
			if got := agentvault.ErrorCode(err); got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
			if err != nil && hasDigit(agentvault.ErrorMessage(err)) {
				t.Fatalf("refusal message carries a digit: %q", agentvault.ErrorMessage(err))
			}
		})
	}
}

func FuzzCheckSelector(f *testing.F) {
	for _, tc := range selectorCases {
		f.Add(tc.sel)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		err := CheckSelectorAfterFill(sel)
		if err != nil {
			if c := agentvault.ErrorCode(err); c != agentvault.CodeSensitiveDataBlocked && c != agentvault.CodeInvalidParams {
				t.Fatalf("unexpected code %q", c)
			}
			if strings.Contains(agentvault.ErrorMessage(err), sel) && len(sel) > 3 {
				t.Fatal("the refusal echoes the selector")
			}
			return
		}
		// Naive reference: anything the check lets through has no
		// value-attribute test and no text match with a digit.
		l := strings.ToLower(decodeCSSEscapes(sel))
		if strings.Contains(l, "[value") || strings.Contains(l, "@value") {
			t.Fatal("allowed a value test")
		}
		for _, m := range []string{":has-text(", ":text(", ":text-is("} {
			if i := strings.Index(l, m); i >= 0 {
				if arg, ok := parenArg(l[i+len(m)-1:]); ok && hasDigit(arg) {
					t.Fatal("allowed a digit in a text match")
				}
			}
		}
		if strings.HasPrefix(strings.TrimSpace(l), "text=") && hasDigit(l) && !strings.Contains(l, ">>") {
			t.Fatal("allowed text= with a digit")
		}
		_ = ValidateHintSelector(sel, true)
		_ = IsRefSelector(sel)
	})
}

func TestValidateHintSelector(t *testing.T) {
	for _, tc := range []struct {
		sel       string
		afterFill bool
		ok        bool
	}{
		{".summary__grand-total", false, true},
		{"#order-total", true, true},
		{"div.total > span", true, true},
		{"[data-total]", true, true},
		{"[data-testid=\"total\"]", false, true},
		{"[data-testid=\"total\"]", true, false},
		{"span[class^=tot]", true, false},
		{"div:not([data-x='y'])", true, false},
		{"text=Total", false, false},
		{"span:has-text('Total')", false, false},
		{"#a >> #b", false, false},
		{"//span[@id='t']", false, false},
		{"xpath=//span", false, false},
		{"(//span)[1]", false, false},
		{"_react=Total", false, false},
		{"span:visible", false, false},
		{"css=#total", false, false},
		{"\"Total\"", false, false},
		{"aria-ref=e5", false, false},
		{"span:near(#x)", false, false},
		{"span:text('x')", false, false},
		{"[data-label='a >> b']", false, true},
		{"", false, false},
		{"   ", false, false},
		{strings.Repeat("a", 513), false, false},
		{strings.Repeat("é", 512), false, true},
		{"#a\n#b", false, false},
		{"[data-x='y'", false, false},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			err := ValidateHintSelector(tc.sel, tc.afterFill)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && agentvault.ErrorCode(err) != agentvault.CodeInvalidHint {
				t.Fatalf("code %q", agentvault.ErrorCode(err))
			}
		})
	}
}

func TestIsRefSelector(t *testing.T) {
	for sel, want := range map[string]bool{
		"aria-ref=e12":         true,
		"ARIA-REF=e1":          true,
		"#form >> aria-ref=e3": true,
		"#card-number":         false,
		"input[name='aria']":   false,
		"  aria-ref=f1e7  ":    true,
	} {
		if got := IsRefSelector(sel); got != want {
			t.Errorf("IsRefSelector(%q) = %v", sel, got)
		}
	}
}
