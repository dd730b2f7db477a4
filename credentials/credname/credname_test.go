package credname

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"sankhya", true},
		{"erp-prod", true},
		{"a.b_c-1", true},
		{"0", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"-erp", false},
		{".erp", false},
		{"ERP", false},
		{"erp prod", false},
		{"erp/prod", false},
		{"<b>", false},
		{"erp\n", false},
	} {
		if got := Valid(tc.name); got != tc.ok {
			t.Errorf("Valid(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
