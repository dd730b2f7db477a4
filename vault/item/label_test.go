package item

import (
	"strings"
	"testing"
)

func TestLoginLabel(t *testing.T) {
	cases := map[string]string{
		"github.com": "github", "bbc.co.uk": "bbc", "my_bank.co.uk": "my-bank", "---.com": "login", "": "login",
		"GitHub.COM": "github", "x.org": "x", "xn--bcher-kva.example": "xn--bcher-kva",
		strings.Repeat("a", 40) + ".com": strings.Repeat("a", MaxLabelLen),
	}
	for in, want := range cases {
		if got := LoginLabel(in); got != want {
			t.Errorf("LoginLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
