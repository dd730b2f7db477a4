package browser_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// TestMatchFields: snapshot fields take the selector of the next document
// field with the same role and name, in order; anything unsure falls back to
// a per-ref lookup.
func TestMatchFields(t *testing.T) {
	dom := []browser.DomField{
		browser.NewDomField("textbox", "Address", "#ship-addr"),
		browser.NewDomField("textbox", "Hidden by depth", "#deep"),
		browser.NewDomField("textbox", "Address", "#bill-addr"),
		browser.NewDomField("combobox", "Country", "#country"),
		browser.NewDomField("textbox", "", "#unnamed"),
	}
	fields := []browser.Field{
		{Ref: "e1", Role: "textbox", Name: "Address"},
		{Ref: "e2", Role: "textbox", Name: "Address"},
		{Ref: "e3", Role: "combobox", Name: "Country"},
		{Ref: "e4", Role: "textbox", Name: ""},           // unnamed: by ref
		{Ref: "e5", Role: "textbox", Name: "Not in DOM"}, // name differs: by ref
		{Ref: "e6", Role: "checkbox", Name: "Country"},   // role differs: by ref
	}
	miss := browser.MatchFieldsForTest(fields, []int{0, 1, 2, 3, 4, 5}, dom)
	got := []string{fields[0].Selector, fields[1].Selector, fields[2].Selector}
	if !reflect.DeepEqual(got, []string{"#ship-addr", "#bill-addr", "#country"}) {
		t.Fatalf("selectors %v", got)
	}
	if !reflect.DeepEqual(miss, []int{3, 4, 5}) {
		t.Fatalf("unmatched %v", miss)
	}
}

func TestChooseOption(t *testing.T) {
	months := [][2]string{{"", "MM"}, {"01", "01 - January"}, {"07", "07 - July"}, {"12", "12 - December"}}
	years := [][2]string{{"", "YYYY"}, {"2029", "2029"}, {"2030", "2030"}}
	short := [][2]string{{"29", "29"}, {"30", "30"}}
	countries := [][2]string{{"DE", "Germany"}, {"FR", "France"}}
	cases := []struct {
		opts [][2]string
		want string
		pick string
		ok   bool
	}{
		{months, "12", "12", true},
		{months, "7", "07", true},
		{months, "07", "07", true},
		{years, "2030", "2030", true},
		{short, "2030", "30", true},
		{years, "30", "2030", true},
		{countries, "DE", "DE", true},
		{countries, "france", "FR", true},
		{months, "13", "", false},
		{countries, "Spain", "", false},
	}
	for _, c := range cases {
		got, ok := browser.ChooseOptionForTest(c.opts, c.want)
		if got != c.pick || ok != c.ok {
			t.Errorf("%q: got %q %v, want %q %v", c.want, got, ok, c.pick, c.ok)
		}
	}
}

// TestStripValues: inline values and block-scalar continuations of field
// lines are cut; other lines and element children stay.
func TestStripValues(t *testing.T) {
	raw := "- generic [ref=e1]:\n" +
		"  - textbox \"Card\" [ref=e2]: \"4242 4242\"\n" +
		"  - textbox \"Notes\" [ref=e3]: |\n" +
		"      secret line one\n" +
		"      secret line two\n" +
		"  - combobox \"Country\" [ref=e4]:\n" +
		"    - option \"DE\" [selected]\n" +
		"  - text: Total EUR 42.50\n" +
		"  - iframe [ref=e5]:\n" +
		"    - textbox \"CVC\" [ref=f1e1]: \"737\"\n"
	yaml, fields := browser.CompactForTest(raw)
	for _, bad := range []string{"4242", "secret", "737"} {
		if strings.Contains(yaml, bad) {
			t.Fatalf("value left in:\n%s", yaml)
		}
	}
	for _, keep := range []string{`option "DE" [selected]`, "Total EUR 42.50", `combobox "Country" [ref=e4]:`, `textbox "CVC" [ref=f1e1]`} {
		if !strings.Contains(yaml, keep) {
			t.Fatalf("%q dropped:\n%s", keep, yaml)
		}
	}
	if len(fields) != 4 || fields[3].Frame != "e5" || fields[0].Name != "Card" {
		t.Fatalf("fields %+v", fields)
	}
}

// TestParseDocFields: a script that failed or answered null leaves the
// document unlisted (its fields go the per-ref way); frame indexes come
// back as JSON numbers.
func TestParseDocFields(t *testing.T) {
	full := map[string]any{
		"fields": []any{map[string]any{"role": "textbox", "name": "CVC", "sel": "#cvc"}},
		"frames": []any{map[string]any{"idx": float64(1), "sel": `iframe[title="Card"]`}, map[string]any{"idx": float64(0), "sel": ""}},
		"self":   float64(2),
	}
	cases := []struct {
		name   string
		v      any
		err    error
		ok     bool
		sels   []string
		frames map[int]string
		self   int
	}{
		{"full", full, nil, true, []string{"#cvc"}, map[int]string{1: `iframe[title="Card"]`}, 2},
		{"null", nil, nil, false, nil, map[int]string{}, -1},
		{"error", full, errors.New("frame detached"), false, nil, map[int]string{}, -1},
		{"top", map[string]any{"fields": []any{}, "frames": []any{}, "self": float64(-1)}, nil, true, nil, map[int]string{}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, sels, frames, self := browser.ParseDocFieldsForTest(c.v, c.err)
			if ok != c.ok || !reflect.DeepEqual(sels, c.sels) || !reflect.DeepEqual(frames, c.frames) || self != c.self {
				t.Fatalf("got %v %v %v %d", ok, sels, frames, self)
			}
		})
	}
}

// TestFoldOptions: runs of sibling plain options go on one line with every
// name and state kept (a name that could be misread stays quoted); options with refs or children, a lone option and
// options at another depth stay as they are.
func TestFoldOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"select", []string{`- combobox "Country" [ref=e4]:`, `  - option "Select" [selected]`, `  - option "Austria"`, `  - option "Say \"hi\", ok" [disabled]`, `- button "Go" [ref=e5]`},
			[]string{`- combobox "Country" [ref=e4]:`, `  - options: Select [selected] | Austria | "Say \"hi\", ok" [disabled]`, `- button "Go" [ref=e5]`}},
		{"lone option", []string{`- combobox "A" [ref=e1]:`, `  - option "Only" [selected]`},
			[]string{`- combobox "A" [ref=e1]:`, `  - option "Only" [selected]`}},
		{"listbox options with refs", []string{`- listbox "L" [ref=e1]:`, `  - option "One" [ref=e2]`, `  - option "Two" [ref=e3] [cursor=pointer]`},
			[]string{`- listbox "L" [ref=e1]:`, `  - option "One" [ref=e2]`, `  - option "Two" [ref=e3] [cursor=pointer]`}},
		{"option with children", []string{`  - option "One":`, `    - img`, `  - option "Two"`},
			[]string{`  - option "One":`, `    - img`, `  - option "Two"`}},
		{"two selects in a row", []string{`  - option "a"`, `  - option "b"`, `    - option "c"`, `    - option "d"`},
			[]string{`  - options: a | b`, `    - options: c | d`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := browser.FoldOptionsForTest(append([]string(nil), tc.in...))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
