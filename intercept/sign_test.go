package intercept_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
)

// fakeSigner records what the proxy asks to sign and answers like
// botauth's signer would for the one chosen host.
type fakeSigner struct {
	mu    sync.Mutex
	calls []intercept.SignArgs
	err   error
}

func (f *fakeSigner) SignRequest(ctx context.Context, a intercept.SignArgs) (http.Header, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, a)
	if f.err != nil {
		return nil, f.err
	}
	if a.Host != "shop.test" {
		return nil, nil
	}
	h := http.Header{}
	h.Set("Signature-Agent", `sig1="https://agent.test"`)
	h.Set("Signature-Input", `sig1=("@authority" "@path");created=1`)
	h.Set("Signature", `sig1=:AAAA:`)
	return h, nil
}

func (f *fakeSigner) last() intercept.SignArgs {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

// TestAgentSignatureHeadersRefused: a request carrying its own Signature,
// Signature-Input or Signature-Agent field, in any letter case, over
// HTTP/1.1 or HTTP/2, is refused with signature_headers_refused before
// anything goes upstream, whether or not the owner turned signing on.
func TestAgentSignatureHeadersRefused(t *testing.T) {
	for _, withSigner := range []bool{false, true} {
		for _, h2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("signer=%v/h2=%v", withSigner, h2), func(t *testing.T) {
				e := startProxy(t, func(c *intercept.Config) {
					if withSigner {
						c.Signer = &fakeSigner{}
					}
				})
				up := startUpstream(t, e.upCA, nil)
				s, pw := e.session()
				for _, name := range []string{"Signature", "signature-input", "SIGNATURE-AGENT"} {
					c := e.rawClient(s, pw, h2)
					req, _ := http.NewRequest(http.MethodGet, hostURL(up, "shop.test", "/"), nil)
					req.Header[name] = []string{`sig1=:AAAA:`}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusForbidden || codeOf(resp) != string(agentvault.CodeSignatureHeaders) {
						t.Errorf("%s: status %d code %q", name, resp.StatusCode, codeOf(resp))
					}
				}
				if n := up.count(); n != 0 {
					t.Errorf("the site received %d requests", n)
				}
				if !strings.Contains(e.logs.String(), "signature_headers_refused") { // agentvault.CodeSignatureHeaders
					t.Error("the refusal is not on the request log line")
				}
			})
		}
	}
}

// TestSignerSeesTheRequestAsSent: the signer is asked after substitution,
// with the destination host, the authority and the path exactly as they go
// upstream (the real value in place of the stand-in), and whether the
// request carries a released card; what it returns is on the request the
// site receives, over HTTP/1.1 and HTTP/2. A host it does not sign gets no
// signature field, and a signer error refuses the request before it leaves.
func TestSignerSeesTheRequestAsSent(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			fs := &fakeSigner{}
			e := startProxy(t, func(c *intercept.Config) { c.Signer = fs })
			up := startUpstream(t, e.upCA, nil)
			e.addCard("1", "4242424242424242", "737", "shop.test")
			e.addLogin("shop", "shop.test", "Opensesame12345")
			s, pw := e.session()
			page := "https://shop.test:" + up.port() + "/checkout"
			pass, err := e.authorize(s, tok("login", "shop", "password"), page)
			if err != nil {
				t.Fatal(err)
			}
			num, err := e.authorize(s, tok("card", "1", "number"), page)
			if err != nil {
				t.Fatal(err)
			}
			c := e.client(s, pw, h2)

			resp, err := c.Get(hostURL(up, "shop.test", "/u/"+pass.Value+"?q=1"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := fs.last()
			if got.Host != "shop.test" || got.Authority != "shop.test:"+up.port() || got.Path != "/u/Opensesame12345" || got.Payment {
				t.Errorf("signer asked %+v", got)
			}
			if got.Org != "org1" || got.KeyID != "key1" || got.Session != s.ID {
				t.Errorf("signer told org %q key %q session %q", got.Org, got.KeyID, got.Session)
			}
			r := up.last()
			if r.Header.Get("Signature-Agent") != `sig1="https://agent.test"` || r.Header.Get("Signature") != `sig1=:AAAA:` || r.Header.Get("Signature-Input") == "" {
				t.Errorf("the site did not receive the signature fields: %v", r.Header)
			}

			body := url.Values{"cc": {num.Value}}.Encode()
			resp, err = c.Post(hostURL(up, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !fs.last().Payment || resp.StatusCode != 200 {
				t.Errorf("a request carrying the card is not a payment: %+v (status %d)", fs.last(), resp.StatusCode)
			}

			resp, err = c.Get(hostURL(up, "evil.test", "/"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if r := up.last(); r.Host != "evil.test:"+up.port() || r.Header.Get("Signature") != "" || r.Header.Get("Signature-Input") != "" || r.Header.Get("Signature-Agent") != "" {
				t.Errorf("a site the signer did not choose received signature fields: %s %v", r.Host, r.Header)
			}

			before := up.count()
			fs.mu.Lock()
			fs.err = agentvault.Errorf(agentvault.CodeAuditUnavailable, "audit log unavailable; request not signed")
			fs.mu.Unlock()
			resp, err = c.Get(hostURL(up, "shop.test", "/after"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if codeOf(resp) != string(agentvault.CodeAuditUnavailable) || up.count() != before {
				t.Errorf("a signer failure: code %q, site received %d more", codeOf(resp), up.count()-before)
			}
		})
	}
}
