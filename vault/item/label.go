package item

import "strings"

// MaxLabelLen bounds a token label ([a-z0-9][a-z0-9-]{0,31}); with the
// longest kind and field a token stays under 64 bytes. Package tokens owns
// the grammar and names this bound; the vault sizes the labels it hands out
// by it.
const MaxLabelLen = 32

// LoginLabel turns a registrable domain into a login's token label (the
// one rule: tokens.LoginLabel trims a URL or host to a domain and calls
// this, the vault calls it when it adds a login): the first DNS label,
// lowercase, runs of anything outside [a-z0-9-] folded to one '-', no
// leading or trailing '-', at most MaxLabelLen characters ("github.com" ->
// "github", "my_bank.co.uk" -> "my-bank"), "login" when nothing is left.
func LoginLabel(domain string) string {
	name, _, _ := strings.Cut(strings.ToLower(domain), ".")
	var b []byte
	for i := 0; i < len(name) && len(b) < MaxLabelLen; i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-' && len(b) > 0:
			b = append(b, c)
		case len(b) > 0 && b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	s := strings.TrimRight(string(b), "-")
	if s == "" {
		return "login"
	}
	return s
}
