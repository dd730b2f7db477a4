package browser_test

import (
	"reflect"
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
