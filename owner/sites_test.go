package owner_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentvault/agentvault/owner"
)

// TestSitesReadThroughHostname: authorized sites and sign-ups go through
// package hostname. Behaviour changes it names: a URL the owner pastes
// (https://Shop.Example/path) is read as its host where it used to be
// refused, and an IDN is stored as punycode where it used to be refused.
func TestSitesReadThroughHostname(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "", newClock())
	for in, want := range map[string]string{
		"https://Shop.Example/checkout?x=1": "shop.example",
		"  www.Shop.Example.  ":             "www.shop.example", // www. is its own host
		"bücher.example":                    "xn--bcher-kva.example",
		"pay.example:8443":                  "pay.example",
		"my_shop.example":                   "my_shop.example",
		"10.0.0.1":                          "10.0.0.1",
	} {
		if err := s.AuthorizeSite(ctx, in, "owner"); err != nil {
			t.Errorf("AuthorizeSite(%q): %v", in, err)
			continue
		}
		if !slices.Contains(siteHosts(t, s), want) {
			t.Errorf("AuthorizeSite(%q) did not store %q: %v", in, want, siteHosts(t, s))
		}
	}
	for _, in := range []string{"localhost", "com", "shop.example@evil.example", "https://a.com@evil.com/", "*.shop.example", "a..b", "ftp://shop.example", ""} {
		if err := s.AuthorizeSite(ctx, in, "owner"); err == nil {
			t.Errorf("AuthorizeSite(%q) accepted", in)
		}
	}
	if err := s.RemoveSite(ctx, "HTTPS://shop.example./"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(siteHosts(t, s), "shop.example") {
		t.Error("RemoveSite by URL left shop.example")
	}

	if err := s.AddSignup(ctx, "https://Bücher.Example/register", "Ada@Example.org", "owner"); err != nil {
		t.Fatal(err)
	}
	ups, err := s.Signups(ctx)
	if err != nil || len(ups) != 1 || ups[0].Site != "xn--bcher-kva.example" || ups[0].Email != "ada@example.org" {
		t.Fatalf("signups %+v %v", ups, err)
	}
	if err := s.RemoveSignup(ctx, "XN--BCHER-KVA.example.", "ada@example.org"); err != nil {
		t.Fatal(err)
	}
	if ups, _ := s.Signups(ctx); len(ups) != 0 {
		t.Fatalf("signup not removed: %+v", ups)
	}
}

func siteHosts(t *testing.T, s *owner.Service) []string {
	t.Helper()
	ds, err := s.Sites(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, d.Host)
	}
	return out
}
