package policy

import (
	"strings"
	"testing"

	"golang.org/x/net/publicsuffix"
)

func TestShippedIntegrationsValidate(t *testing.T) {
	list := ShippedIntegrations().List()
	if len(list) < 4 {
		t.Fatalf("shipped list has %d integrations", len(list))
	}
	if err := ValidateIntegrations(list, publicsuffix.EffectiveTLDPlusOne); err != nil {
		t.Fatalf("shipped list fails the owner's validation: %v", err)
	}
}

func TestPaymentIntegrationMatches(t *testing.T) {
	cases := []struct {
		url, want string
		cse       bool
	}{
		{"https://js.stripe.com/v3/elements-inner-payment-8a43.html#wait=false", "stripe-payment-element", false},
		{"https://js.stripe.com/v3/elements-inner-card-number-8a43.html", "stripe-payment-element", false},
		{"https://js.stripe.com/v3/controller-5e8d.html", "stripe-payment-element", false},
		{"https://JS.Stripe.com./v3/elements-inner-cvc-1.html", "stripe-payment-element", false},
		{"https://checkout.shopifycs.com/number?identifier=abc&location=x", "shopify-card-fields", false},
		{"https://checkout.shopifycs.com/verification_value?identifier=abc", "shopify-card-fields", false},
		{"https://assets.braintreegateway.com/web/3.97.2/html/hosted-fields-frame.min.html#abc", "braintree-hosted-fields", false},
		{"https://checkoutshopper-live.adyen.com/checkoutshopper/securedfields/live_KEY/4.5.0/securedFields.html?type=card", "adyen-secured-fields", true},
		{"https://checkoutshopper-test.adyen.com/checkoutshopper/securedfields/test_K/5.0.0/securedFields.html", "adyen-secured-fields", true},
		// Not integrations.
		{"http://js.stripe.com/v3/elements-inner-card-1.html", "", false},                             // plain http
		{"https://js.stripe.com:8443/v3/elements-inner-card-1.html", "stripe-payment-element", false}, // the host decides, not the port
		{"https://js.stripe.com.evil.example/v3/elements-inner-card-1.html", "", false},               // suffix trick
		{"https://evil.example/js.stripe.com/v3/elements-inner-card-1.html", "", false},               // host in the path
		{"https://js.stripe.com@evil.example/v3/elements-inner-card-1.html", "", false},               // user info
		{"https://js.stripe.com/v3/x/elements-inner-card-1.html", "", false},                          // extra segment
		{"https://checkoutshopper-live.adyen.com.evil.example/checkoutshopper/securedfields/a/b/securedFields.html", "", false},
		{"https://a.b.adyen.com/checkoutshopper/securedfields/a/b/securedFields.html", "", false}, // '*' spans one label only
		{"https://checkout.shopifycs.com/number/extra", "", false},
		{"https://shop.example/checkout", "", false},
		{"not a url", "", false},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			in, ok := PaymentIntegration(c.url)
			if ok != (c.want != "") || in.Name != c.want {
				t.Fatalf("PaymentIntegration = %q, %v; want %q", in.Name, ok, c.want)
			}
			if in.ClientSideEncryption != c.cse {
				t.Fatalf("client_side_encryption = %v, want %v", in.ClientSideEncryption, c.cse)
			}
		})
	}
	in, _ := PaymentIntegration("https://js.stripe.com/v3/elements-inner-payment-1.html")
	if !in.PostsToOrigin("https://api.stripe.com:443") || !in.PostsToOrigin("https://API.stripe.com/") || in.PostsToOrigin("https://api.stripe.com:8443") || in.PostsToOrigin("http://api.stripe.com") {
		t.Errorf("stripe PostsToOrigin: %v", in.PostsTo)
	}
}

func TestMergeIntegrationsValidation(t *testing.T) {
	ok := Integration{Name: "test-pay", Frames: []string{"js.pay.test:8443/elements/*"}, PostsTo: []string{"https://api.pay.test:9443"}}
	bad := []struct {
		name string
		in   Integration
		want string
	}{
		{"no name", Integration{Frames: ok.Frames}, "name"},
		{"no frames", Integration{Name: "x"}, "frames is empty"},
		{"http posts_to", Integration{Name: "x", Frames: ok.Frames, PostsTo: []string{"http://api.pay.test"}}, "only https"},
		{"posts_to with a path", Integration{Name: "x", Frames: ok.Frames, PostsTo: []string{"https://api.pay.test/v1"}}, "scheme, host and port only"},
		{"posts_to wildcard", Integration{Name: "x", Frames: ok.Frames, PostsTo: []string{"https://*.pay.test"}}, "no wildcards"},
		{"posts_to public suffix", Integration{Name: "x", Frames: ok.Frames, PostsTo: []string{"https://co.uk"}}, "public suffix"},
		{"posts_to IP", Integration{Name: "x", Frames: ok.Frames, PostsTo: []string{"https://10.0.0.1"}}, "IP address"},
		{"http frame", Integration{Name: "x", Frames: []string{"http://js.pay.test/x"}}, "only https"},
		{"frame without path", Integration{Name: "x", Frames: []string{"js.pay.test"}}, "needs a path"},
		{"wildcard on a public suffix", Integration{Name: "x", Frames: []string{"*.co.uk/x"}}, "public suffix"},
		{"wildcard on a test TLD", Integration{Name: "x", Frames: []string{"*.test/x"}}, "public suffix"},
		{"wildcard label in the middle", Integration{Name: "x", Frames: []string{"js.*.pay.test/x"}}, "leftmost"},
		{"two wildcards", Integration{Name: "x", Frames: []string{"*-*.pay.test/x"}}, "one '*'"},
		{"bare public suffix frame", Integration{Name: "x", Frames: []string{"github.io/x"}}, "public suffix"},
		{"frame with a query", Integration{Name: "x", Frames: []string{"js.pay.test/x?a=1"}}, "no query"},
		{"non-ASCII host", Integration{Name: "x", Frames: []string{"jš.pay.test/x"}}, "punycode"},
		{"duplicate", Integration{Name: "Test-Pay", Frames: ok.Frames}, "listed twice"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			list := []Integration{c.in}
			if c.name == "duplicate" {
				list = []Integration{ok, c.in}
			}
			_, err := MergeIntegrations(list, publicsuffix.EffectiveTLDPlusOne)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
		})
	}

	s, err := MergeIntegrations([]Integration{ok, {Name: "stripe-payment-element", Frames: []string{"js.stripe.com/v4/inner-*"}, PostsTo: []string{"https://api.stripe.com"}}}, publicsuffix.EffectiveTLDPlusOne)
	if err != nil {
		t.Fatal(err)
	}
	if in, found := s.Match("https://js.pay.test:8443/elements/payment?pi=1"); !found || in.Name != "test-pay" || !in.PostsToOrigin("https://api.pay.test:9443") {
		t.Errorf("owner entry not matched: %+v %v", in, found)
	}
	if _, found := s.Match("https://js.pay.test/elements/payment"); found {
		t.Error("a pattern with a port matched another port")
	}
	// The owner's stripe entry replaced the shipped one.
	if _, found := s.Match("https://js.stripe.com/v3/elements-inner-card-1.html"); found {
		t.Error("the shipped stripe entry survived an owner entry of the same name")
	}
	if in, found := s.Match("https://checkout.shopifycs.com/number"); !found || in.Name != "shopify-card-fields" {
		t.Error("shipped entries are lost by a merge")
	}
	if n := len(s.List()); n != len(ShippedIntegrations().List())+1 {
		t.Errorf("merged list has %d entries", n)
	}
	// The shipped list itself is untouched.
	if _, found := PaymentIntegration("https://js.pay.test:8443/elements/payment"); found {
		t.Error("an owner merge changed the shipped list")
	}
}
