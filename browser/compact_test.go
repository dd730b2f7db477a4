package browser_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// TestCompactSnapshot: the rewrite keeps every field's ref and every
// control's, drops generic wrappers, refs of elements nobody acts on,
// labels repeated beside their fields, decorative images and the symbols of
// a named image, and never shows a value: inline, in a block scalar, as a
// text child of a field with a placeholder, or behind a key Playwright had
// to quote.
func TestCompactSnapshot(t *testing.T) {
	raw := strings.Join([]string{
		`- generic [active] [ref=e1]:`,
		`  - banner [ref=e2]:`,
		`    - link "Home" [ref=e3] [cursor=pointer]:`,
		`      - /url: /`,
		`      - img [ref=e4]`,
		`  - generic [ref=e5]:`,
		`    - generic [ref=e6]: Email`,
		`    - textbox "Email" [ref=e7]: ada@example.org`,
		`    - textbox "Card" [ref=e8]:`,
		`      - /placeholder: 1234 1234 1234 1234`,
		`      - text: "4000 0000 0000 0077"`,
		`    - 'textbox "Code: promo" [ref=e9]': SAVE-SECRET-1`,
		`    - textbox "Notes" [ref=e10]: |`,
		`        secret line one`,
		`    - generic [ref=e11]:`,
		`      - checkbox "Gift" [checked] [ref=e12]`,
		`      - generic [ref=e13]: Gift`,
		`  - list [ref=e14]:`,
		`    - listitem [ref=e15]:`,
		`      - link "Trail Runner" [ref=e16] [cursor=pointer]:`,
		`        - /url: /p/1`,
		`    - listitem [ref=e17]:`,
		`      - img "4 out of 5 stars" [ref=e18]: ★★★★☆`,
		`      - generic [ref=e19]: (231)`,
		`      - paragraph [ref=e20]: €79.00`,
		`      - button "Add Trail Runner to cart" [ref=e21]: Add`,
		`  - generic [ref=e22] [cursor=pointer]: Open chat`,
		`  - heading "Shipping" [level=2] [ref=e23]`,
		`  - iframe [ref=e24]:`,
		`    - generic [ref=f1e1]:`,
		`      - generic [ref=f1e2]: Card number`,
		`      - textbox "Card number" [ref=f1e3]: "4242"`,
	}, "\n")
	yaml, fields := browser.CompactForTest(raw)
	for _, bad := range []string{"ada@", "4000", "SAVE-SECRET", "secret line", "4242", "★", "generic [ref=e6]", "[ref=e2]", "[ref=e14]", "[ref=e15]", "[ref=e18]", "[ref=e20]", "[ref=e23]", "[active]", "img [ref=e4]"} {
		if strings.Contains(yaml, bad) {
			t.Errorf("%q left in:\n%s", bad, yaml)
		}
	}
	for _, keep := range []string{
		`- link "Home" [ref=e3]:`, `- /url: /p/1`, `textbox "Card" [placeholder="1234 1234 1234 1234"] [ref=e8]`,
		`'textbox "Code: promo" [ref=e9]'`, `checkbox "Gift" [checked] [ref=e12]`,
		`img "4 out of 5 stars"`, `- text: (231) €79.00`, `button "Add Trail Runner to cart" [ref=e21]`,
		`- generic [ref=e22] [cursor=pointer]: Open chat`, `heading "Shipping" [level=2]`,
		`- iframe [ref=e24]:`, `textbox "Card number" [ref=f1e3]`,
	} {
		if !strings.Contains(yaml, keep) {
			t.Errorf("%q dropped:\n%s", keep, yaml)
		}
	}
	// The label next to a field, and the link of a one-link list item, are
	// gone; what is left is no deeper than it has to be.
	if strings.Contains(yaml, "text: Gift") || strings.Contains(yaml, "text: Email") || strings.Contains(yaml, "text: Card number") {
		t.Errorf("a label repeated beside its field is left:\n%s", yaml)
	}
	if !strings.Contains(yaml, "\n  - link \"Trail Runner\" [ref=e16]:") {
		t.Errorf("the one-link list item was not unwrapped:\n%s", yaml)
	}
	var refs []string
	for _, f := range fields {
		refs = append(refs, f.Ref)
	}
	if got := strings.Join(refs, " "); got != "e7 e8 e9 e10 e12 f1e3" {
		t.Fatalf("field refs %q", got)
	}
	if fields[5].Frame != "e24" || fields[2].Name != "Code: promo" {
		t.Fatalf("fields %+v", fields)
	}
	// Every line is still a YAML sequence item, indented by two per level.
	item := regexp.MustCompile(`^(  )*- `)
	for _, l := range strings.Split(yaml, "\n") {
		if !item.MatchString(l) {
			t.Fatalf("line %q is not an item:\n%s", l, yaml)
		}
	}
}

// TestCompactQuotesLikePlaywright: names are quoted the way Playwright
// quotes them (JSON.stringify): "&", "<" and ">" stay as they are, quotes
// and backslashes are escaped, and a name read back is the name written.
func TestCompactQuotesLikePlaywright(t *testing.T) {
	raw := strings.Join([]string{
		`- link "Shipping & returns <EU>" [ref=e1] [cursor=pointer]:`,
		`  - /url: /help`,
		`- button "Say \"hi\" \\ wave" [ref=e2]`,
		`- combobox "Size" [ref=e3]:`,
		`  - option "S & M" [selected]`,
		`  - option "L"`,
	}, "\n")
	yaml, _ := browser.CompactForTest(raw)
	for _, want := range []string{`link "Shipping & returns <EU>" [ref=e1]`, `button "Say \"hi\" \\ wave" [ref=e2]`, `- options: S & M [selected] | L`} {
		if !strings.Contains(yaml, want) {
			t.Errorf("%q missing from:\n%s", want, yaml)
		}
	}
}
