package intercept_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"

	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/policy"
	"github.com/elazarl/goproxy"
	"golang.org/x/net/publicsuffix"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

func TestP6_DeploymentCAAndShortLivedLeaves(t *testing.T) {
	blobs := &memBlobs{}
	ctx := context.Background()
	ca, err := intercept.LoadOrCreateCA(ctx, blobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := blobs.m[intercept.CABlobName]; !ok {
		t.Fatal("CA was not sealed into the blob store")
	}
	again, err := intercept.LoadOrCreateCA(ctx, blobs, nil)
	if err != nil || !again.Certificate().Equal(ca.Certificate()) {
		t.Fatal("reloading the CA from its blob gave another CA")
	}
	other, _ := intercept.LoadOrCreateCA(ctx, &memBlobs{}, nil)
	if other.Certificate().Equal(ca.Certificate()) {
		t.Fatal("two deployments share a CA")
	}
	cert := ca.Certificate()
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() || !cert.IsCA {
		t.Fatal("CA is not an ECDSA P-256 CA")
	}
	if goproxy.GoproxyCa.Leaf != nil && goproxy.GoproxyCa.Leaf.Equal(cert) || bytes.Equal(goproxy.GoproxyCa.Certificate[0], cert.Raw) {
		t.Fatal("goproxy's built-in CA is in use")
	}

	// Through the proxy: the leaf chains to our CA, is short-lived, the CA
	// is sent in the chain, serials are random, and the leaf is cached.
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	var serials []string
	for _, host := range []string{"shop.test", "evil.test"} {
		tc, err := e.tlsTunnel(t, s, pw, host+":"+up.port(), host)
		if err != nil {
			t.Fatal(err)
		}
		st := tc.ConnectionState()
		leaf := st.PeerCertificates[0]
		if len(st.PeerCertificates) < 2 || !st.PeerCertificates[1].Equal(e.ca.Certificate()) {
			t.Fatal("CA certificate not sent in the chain")
		}
		if leaf.NotAfter.Sub(leaf.NotBefore) > 26*time.Hour {
			t.Fatalf("leaf lives %v", leaf.NotAfter.Sub(leaf.NotBefore))
		}
		if leaf.SerialNumber.BitLen() < 120 {
			t.Fatalf("leaf serial has %d bits", leaf.SerialNumber.BitLen())
		}
		serials = append(serials, leaf.SerialNumber.String())
		tc.Close()
	}
	if serials[0] == serials[1] {
		t.Fatal("two leaves share a serial")
	}
	tc, err := e.tlsTunnel(t, s, pw, "shop.test:"+up.port(), "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	if tc.ConnectionState().PeerCertificates[0].SerialNumber.String() != serials[0] {
		t.Fatal("leaf for a host seen before was not served from the cache")
	}
	tc.Close()
	m := metricsText(t, e)
	if !strings.Contains(m, "agentvault_proxy_leaf_cache_hits_total 1") || !strings.Contains(m, "agentvault_proxy_leaf_cache_misses_total 2") {
		t.Fatalf("leaf cache metrics wrong:\n%s", grepLines(m, "leaf_cache"))
	}
}

func TestP5_UpstreamTLSVerifiedAndEnvProxyIgnored(t *testing.T) {
	// A proxy variable pointing nowhere must not matter.
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	e := startProxy(t, nil)
	trusted := startUpstream(t, e.upCA, nil)
	untrusted := startUpstream(t, newUpstreamCA(t), nil) // signed by a CA the proxy does not know
	s, pw := e.session()
	c := e.client(s, pw, false)
	resp, err := c.Get(hostURL(trusted, "shop.test", "/"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("trusted upstream: %v %v", err, resp)
	}
	resp.Body.Close()
	resp, err = c.Get(hostURL(untrusted, "shop.test", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || codeOf(resp) != "upstream_tls" {
		t.Fatalf("unverified upstream: %d %s", resp.StatusCode, codeOf(resp))
	}
	if untrusted.count() != 0 {
		t.Fatal("a request reached an upstream whose certificate did not verify")
	}
	// The name must match too: the upstream certificate has no name "nomatch.test".
	if e.srv.UpstreamTransport().Proxy != nil || e.srv.UpstreamTransport().TLSClientConfig.InsecureSkipVerify {
		t.Fatal("upstream transport reads the environment or skips verification")
	}
}

func TestP3_PrivateDestinationsRefused(t *testing.T) {
	up := (*upstream)(nil)
	e := startProxy(t, func(c *intercept.Config) {
		c.UnsafeAllowPrivateRanges = false
		c.Resolver = hostsResolver{"metadata.test": "169.254.169.254", "rfc1918.test": "10.1.2.3", "loop.test": "127.0.0.1", "mapped.test": "::ffff:127.0.0.1", "public.test": "93.184.216.34"}
	})
	up = startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	for _, authority := range []string{
		"127.0.0.1:" + up.port(), "loop.test:" + up.port(), "metadata.test:443", "rfc1918.test:443",
		"[::1]:" + up.port(), "[::ffff:127.0.0.1]:" + up.port(), "mapped.test:" + up.port(), "100.64.0.1:443",
		"[64:ff9b::7f00:1]:443", "[fd00::1]:443", "224.0.0.1:443", "0.0.0.0:" + up.port(), "[fe80::1]:443",
	} {
		t.Run(authority, func(t *testing.T) {
			_, _, resp := e.connect(t, s, pw, authority)
			if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "private_destination" {
				t.Fatalf("CONNECT %s: %d %s", authority, resp.StatusCode, codeOf(resp))
			}
		})
	}
	if up.accepts.Load() != 0 {
		t.Fatalf("upstream accepted %d connections", up.accepts.Load())
	}
}

// rebinder answers a public address first, then loopback: the check and
// the dial must not be fooled (the dial re-vets what it resolves).
type rebinder struct{ n atomic.Int64 }

func (r *rebinder) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if r.n.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func TestP3_DNSRebindingRefused(t *testing.T) {
	rb := &rebinder{}
	e := startProxy(t, func(c *intercept.Config) { c.UnsafeAllowPrivateRanges = false; c.Resolver = rb })
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	resp, err := e.client(s, pw, false).Get(hostURL(up, "rebind.test", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "private_destination" || up.accepts.Load() != 0 {
		t.Fatalf("rebinding: code %q, upstream accepts %d", codeOf(resp), up.accepts.Load())
	}
}

func TestP3_ClassifiesAddresses(t *testing.T) {
	for _, tc := range []struct {
		ip      string
		private bool
	}{
		{"127.0.0.1", true}, {"10.0.0.1", true}, {"172.16.0.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"100.64.0.1", true}, {"100.127.255.255", true}, {"0.0.0.0", true},
		{"224.0.0.251", true}, {"255.255.255.255", true}, {"::1", true}, {"::", true}, {"fc00::1", true},
		{"fe80::1", true}, {"64:ff9b::a00:1", true}, {"::ffff:10.0.0.1", true}, {"ff02::1", true},
		{"8.8.8.8", false}, {"93.184.216.34", false}, {"2606:4700::1111", false}, {"::ffff:8.8.8.8", false},
	} {
		if got := intercept.IsPrivateAddr(netip.MustParseAddr(tc.ip)); got != tc.private {
			t.Errorf("IsPrivateAddr(%s) = %v", tc.ip, got)
		}
	}
}

func TestP16_ProxyLoopRefused(t *testing.T) {
	e := startProxy(t, nil) // private ranges allowed: the loop rule holds anyway
	s, pw := e.session()
	_, port, _ := net.SplitHostPort(e.addr)
	for _, authority := range []string{e.addr, "localhost.test:" + port} {
		e.srv.AddSelf(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}) // harmless extra
		_, _, resp := e.connect(t, s, pw, strings.Replace(authority, "localhost.test", "127.0.0.1", 1))
		if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "proxy_loop" {
			t.Fatalf("CONNECT to self %s: %d %s", authority, resp.StatusCode, codeOf(resp))
		}
	}
}

func TestP1_StrictEgressRefusesBeforeConnecting(t *testing.T) {
	e := startProxy(t, func(c *intercept.Config) { c.EgressStrict = true; c.AllowedHosts = []string{"shop.test"} })
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	c := e.client(s, pw, false)
	resp, err := c.Get(hostURL(up, "shop.test", "/"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed host: %v %v", err, resp)
	}
	resp.Body.Close()
	before := up.accepts.Load()
	_, _, r := e.connect(t, s, pw, "evil.test:"+up.port())
	if r.StatusCode != http.StatusForbidden || codeOf(r) != "destination_unauthorized" || up.accepts.Load() != before {
		t.Fatalf("strict egress: %d %s, accepts %d→%d", r.StatusCode, codeOf(r), before, up.accepts.Load())
	}
}

func TestP4_PlainHTTPRefused(t *testing.T) {
	e := startProxy(t, nil)
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { plainHits.Add(1) }))
	defer plain.Close()
	s, pw := e.session()

	t.Run("absolute-form http", func(t *testing.T) {
		resp, err := e.client(s, pw, false).Get(plain.URL + "/?card=" + tok("card", "1", "number"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "insecure_site" {
			t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
		}
	})
	t.Run("tunnel without TLS", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
		c, br, resp := e.connect(t, s, pw, "shop.test:"+port)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n")
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode != http.StatusForbidden || codeOf(r) != "insecure_site" {
			t.Fatalf("%d %s", r.StatusCode, codeOf(r))
		}
	})
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://shop.test/next", http.StatusFound)
		}
	})
	t.Run("h2c upgrade", func(t *testing.T) {
		tc, err := e.tlsTunnel(t, s, pw, "shop.test:"+up.port(), "shop.test")
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := rawExchange(t, tc, "GET / HTTP/1.1\r\nHost: shop.test:"+up.port()+"\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
		if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "insecure_site" {
			t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
		}
		if up.count() != 0 {
			t.Fatal("h2c upgrade reached the upstream")
		}
	})
	t.Run("redirect to http", func(t *testing.T) {
		resp, err := e.client(s, pw, false).Get(hostURL(up, "shop.test", "/redirect"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "insecure_site" || resp.Header.Get("Location") != "" {
			t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
		}
	})
	if plainHits.Load() != 0 {
		t.Fatalf("plain http server got %d requests", plainHits.Load())
	}
}

func TestP2_NormalizeDestination(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"A.COM.", "a.com:443"},
		{"a.com:443", "a.com:443"},
		{"a.com:0443", "a.com:443"},
		{"a.com.evil.com", "a.com.evil.com:443"},
		{"[::ffff:1.2.3.4]:443", "1.2.3.4:443"},
		{"аpple.test", "xn--pple-43d.test:443"}, // Cyrillic а: a homograph, not apple.test
		{"a.com:8443", "a.com:8443"},
		{"evil.com/a.com", ""},
		{"a.com@evil.com", ""},
		{"a..com", ""},
		{"", ""},
		{"a.com:99999", ""},
		{"[fe80::1%25eth0]:443", ""},
	} {
		d, err := intercept.NormalizeDestination(tc.in, 443)
		got := ""
		if err == nil {
			got = d.String()
		}
		if got != tc.want {
			t.Errorf("NormalizeDestination(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestP2_TokenBoundToSiteNeverSubstitutedElsewhere(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	const real = "4111111111111111"
	e.addCard("1", real, "123", "shop.test")
	e.addLogin("example", "example.com", "hunter2-Secret!")
	s, pw := e.session()
	a, err := e.authorize(s, tok("card", "1", "number"), "https://shop.test:"+up.port()+"/checkout")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.authorize(s, tok("card", "1", "number"), "https://evil.test/checkout"); err == nil {
		t.Fatal("a card for shop.test was authorized on evil.test")
	}
	la, err := e.authorize(s, tok("login", "example", "password"), "https://login.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.authorize(s, tok("login", "example", "password"), "https://example.com.evil.test/"); err == nil {
		t.Fatal("a login for example.com was authorized on example.com.evil.test")
	}
	port := up.port()
	cases := []struct {
		name, authority, sni, raw string
		wantCode                  string
	}{
		{"other host", "evil.test:" + port, "evil.test", "POST / HTTP/1.1\r\nHost: evil.test:" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
		{"Host differs from CONNECT", "shop.test:" + port, "shop.test", "POST / HTTP/1.1\r\nHost: evil.test:" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
		{"absolute URL to another host", "shop.test:" + port, "shop.test", "POST https://evil.test:" + port + "/ HTTP/1.1\r\nHost: shop.test:" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
		{"another port", "shop.test:" + port, "shop.test", "POST / HTTP/1.1\r\nHost: shop.test:1" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
		{"suffix trick", "shop.test.evil.test:" + port, "shop.test.evil.test", "POST / HTTP/1.1\r\nHost: shop.test.evil.test:" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
		{"login on sibling host not authorized", "www.example.com:" + port, "www.example.com", "POST / HTTP/1.1\r\nHost: www.example.com:" + port + "\r\nContent-Length: %d\r\n\r\n%s", "destination_unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := up.count()
			body := "card=" + a.Value + "&pw=" + url.QueryEscape(la.Value)
			tconn, err := e.tlsTunnel(t, s, pw, tc.authority, tc.sni)
			if err != nil {
				t.Fatal(err)
			}
			resp, br := rawExchange(t, tconn, fmt.Sprintf(tc.raw, len(body), body))
			if codeOf(resp) != tc.wantCode {
				t.Fatalf("code %q (%d), want %s", codeOf(resp), resp.StatusCode, tc.wantCode)
			}
			if !closedAfter(resp, br, tconn) {
				t.Fatal("connection not closed after refusal")
			}
			if up.count() != before {
				t.Fatal("refused request reached the upstream")
			}
		})
	}
	t.Run("SNI differs from CONNECT", func(t *testing.T) {
		_, err := e.tlsTunnel(t, s, pw, "shop.test:"+port, "evil.test")
		if err == nil {
			t.Fatal("handshake with a mismatched SNI succeeded")
		}
	})
	t.Run("scope by registrable domain", func(t *testing.T) {
		login := e.vault.items[1]
		for host, want := range map[string]bool{"example.com": true, "login.example.com": true, "www.example.com": true,
			"example.com.evil.test": false, "evilexample.com": false, "example.co": false} {
			if got := policy.NewEngine(policy.Rates{}, publicsuffix.EffectiveTLDPlusOne).ScopeAdmits(login, host); got != want {
				t.Errorf("ScopeAdmits(login example.com, %s) = %v", host, got)
			}
		}
	})
	leakcheck.New(leakcheck.Value("card number", real)).Logs(t, "the proxy's log", []byte(e.logs.String()))
}

func TestP8_SmugglingRefusedAndConnectionClosed(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	h := "shop.test:" + up.port()
	for _, tc := range []struct{ name, raw string }{
		{"duplicate Content-Length", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
		{"conflicting Content-Length", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"},
		{"Content-Length and chunked", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"two Transfer-Encoding", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"Transfer-Encoding not chunked", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A: a\r\n b\r\n\r\n"},
		{"bare LF", "GET / HTTP/1.1\nHost: " + h + "\n\n"},
		{"Connection names a header", "GET / HTTP/1.1\r\nHost: " + h + "\r\nConnection: keep-alive, Authorization\r\nAuthorization: Basic eDp5\r\n\r\n"},
		{"space before colon", "GET / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length : 0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tconn, err := e.tlsTunnel(t, s, pw, h, "shop.test")
			if err != nil {
				t.Fatal(err)
			}
			resp, br := rawExchange(t, tconn, tc.raw)
			if resp.StatusCode != http.StatusBadRequest || codeOf(resp) != "malformed_request" {
				t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
			}
			if !closedAfter(resp, br, tconn) {
				t.Fatal("connection not closed after refusal")
			}
		})
	}
	if up.count() != 0 {
		t.Fatalf("upstream got %d smuggling attempts", up.count())
	}
	// A well-formed request on the same kind of tunnel still works.
	e.getOverTunnel(t, s, pw, h)
}

// substitution fixtures shared by P9, P10, P12.
type subFixture struct {
	e                    *proxyEnv
	up                   *upstream
	s                    *broker.Session
	pw                   string
	number, cvv, passwd  string
	numSI, cvvSI, passSI string
	client               *http.Client
}

func newSubFixture(t testing.TB, h2 bool, handler http.HandlerFunc) *subFixture {
	return newSubFixtureWith(t, h2, handler, "4242424242424242", "737", "Tr0ub4dor&3xyz!")
}

func newSubFixtureWith(t testing.TB, h2 bool, handler http.HandlerFunc, number, cvv, passwd string) *subFixture {
	f := &subFixture{number: number, cvv: cvv, passwd: passwd}
	f.e = startProxy(t, nil)
	f.up = startUpstream(t, f.e.upCA, handler)
	f.e.addCard("1", f.number, f.cvv, "shop.test")
	f.e.addLogin("shop", "shop.test", f.passwd)
	f.s, f.pw = f.e.session()
	page := "https://shop.test:" + f.up.port() + "/checkout"
	for _, x := range []struct {
		tok string
		dst *string
	}{{tok("card", "1", "number"), &f.numSI}, {tok("card", "1", "cvv"), &f.cvvSI}, {tok("login", "shop", "password"), &f.passSI}} {
		a, err := f.e.authorize(f.s, x.tok, page)
		if err != nil {
			t.Fatal(err)
		}
		if !a.StandIn || a.Value == "" {
			t.Fatal("secret field not given as a stand-in")
		}
		*x.dst = a.Value
	}
	if f.numSI == f.number || f.numSI[:6] != f.number[:6] || f.numSI[12:] != f.number[12:] || len(f.passSI) != len(f.passwd) {
		t.Fatal("stand-ins are not format-preserving")
	}
	f.client = f.e.client(f.s, f.pw, h2)
	// Scrubbing covers the values a host was sent (P10): the shop is sent
	// all three once, as a checkout would.
	f.deliver(t)
	return f
}

// reauth authorizes the fixture's three tokens again (a fill before a
// submit), for requests that do not go through f.client.
func (f *subFixture) reauth(t testing.TB) {
	t.Helper()
	page := "https://shop.test:" + f.up.port() + "/checkout"
	for _, tk := range []string{tok("card", "1", "number"), tok("card", "1", "cvv"), tok("login", "shop", "password")} {
		if _, err := f.e.sessions.Authorize(context.Background(), f.s, broker.AuthorizeRequest{Token: tk, PageURL: page}); err != nil {
			t.Fatal(err)
		}
	}
}

// deliver sends the fixture's three stand-ins to the shop once, so it is a
// recipient of their real values.
func (f *subFixture) deliver(t testing.TB) {
	t.Helper()
	body := url.Values{"n": {f.numSI}, "c": {f.cvvSI}, "p": {f.passSI}}.Encode()
	resp, err := f.client.Post(f.url("/__deliver"), "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c := codeOf(resp); c != "" {
		t.Fatalf("delivering the values to the shop: %s", c)
	}
}

func (f *subFixture) url(path string) string { return hostURL(f.up, "shop.test", path) }

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func TestP9_SubstitutesEverywhere(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			f := newSubFixture(t, h2, nil)
			do := func(t *testing.T, req *http.Request) recorded {
				resp, err := f.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status %d code %s", resp.StatusCode, codeOf(resp))
				}
				return f.up.last()
			}
			mustHave := func(t *testing.T, got []byte, want ...string) {
				for _, w := range want {
					if !bytes.Contains(got, []byte(w)) {
						t.Fatalf("upstream did not receive the real value (%d bytes received)", len(got))
					}
				}
				for _, si := range []string{f.numSI, f.passSI, "av_"} {
					if bytes.Contains(got, []byte(si)) {
						t.Fatal("a stand-in or token reached the upstream")
					}
				}
				// A 3-digit CVV stand-in turns up by chance inside random
				// multipart boundaries: it counts only as a whole field.
				if wholeField(got, f.cvvSI) {
					t.Fatal("the CVV stand-in reached the upstream")
				}
			}
			t.Run("form", func(t *testing.T) {
				body := url.Values{"cc": {f.numSI}, "cvc": {f.cvvSI}, "pw": {f.passSI}}.Encode()
				req, _ := http.NewRequest("POST", f.url("/pay"), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				got := do(t, req)
				mustHave(t, got.Body, "cc="+f.number, "cvc="+f.cvv, "pw="+url.QueryEscape(f.passwd))
			})
			t.Run("json with escapes", func(t *testing.T) {
				b, _ := json.Marshal(map[string]string{"number": f.numSI, "password": f.passSI})
				b = bytes.Replace(b, []byte(f.numSI[:1]), []byte(`\u00`+fmt.Sprintf("%x", f.numSI[0])), 0) // no-op guard
				req, _ := http.NewRequest("POST", f.url("/api"), bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				got := do(t, req)
				var m map[string]string
				if err := json.Unmarshal(got.Body, &m); err != nil || m["number"] != f.number || m["password"] != f.passwd {
					t.Fatal("JSON body not substituted correctly")
				}
			})
			t.Run("json \\u-escaped stand-in", func(t *testing.T) {
				var esc strings.Builder
				for _, c := range f.numSI {
					fmt.Fprintf(&esc, `\u%04x`, c)
				}
				req, _ := http.NewRequest("POST", f.url("/api"), strings.NewReader(`{"n":"`+esc.String()+`"}`))
				req.Header.Set("Content-Type", "application/json")
				got := do(t, req)
				var m map[string]string
				if err := json.Unmarshal(got.Body, &m); err != nil || m["n"] != f.number {
					t.Fatal("\\u-escaped JSON stand-in not substituted")
				}
			})
			t.Run("query and path", func(t *testing.T) {
				req, _ := http.NewRequest("GET", f.url("/card/"+f.numSI+"?pw="+url.QueryEscape(f.passSI)), nil)
				got := do(t, req)
				mustHave(t, []byte(got.RequestURI), "/card/"+f.number, "pw="+url.QueryEscape(f.passwd))
			})
			t.Run("basic auth and header", func(t *testing.T) {
				req, _ := http.NewRequest("GET", f.url("/login"), nil)
				req.SetBasicAuth("owner", f.passSI)
				req.Header.Set("X-Card", f.numSI)
				got := do(t, req)
				if got.Header.Get("X-Card") != f.number {
					t.Fatal("header not substituted")
				}
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte("owner:"+f.passwd))
				if got.Header.Get("Authorization") != want {
					t.Fatal("Basic credentials not substituted")
				}
			})
			t.Run("multipart", func(t *testing.T) {
				var buf bytes.Buffer
				mw := multipart.NewWriter(&buf)
				_ = mw.WriteField("cc", f.numSI)
				_ = mw.WriteField("pw", f.passSI)
				_ = mw.Close()
				req, _ := http.NewRequest("POST", f.url("/mp"), &buf)
				req.Header.Set("Content-Type", mw.FormDataContentType())
				got := do(t, req)
				mustHave(t, got.Body, f.number, f.passwd)
				mr := multipart.NewReader(bytes.NewReader(got.Body), mw.Boundary())
				p, err := mr.NextPart()
				if err != nil {
					t.Fatal(err)
				}
				v, _ := io.ReadAll(p)
				if string(v) != f.number {
					t.Fatal("multipart part not substituted cleanly")
				}
			})
			t.Run("gzip body", func(t *testing.T) {
				req, _ := http.NewRequest("POST", f.url("/gz"), bytes.NewReader(gz([]byte("cc="+f.numSI))))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Content-Encoding", "gzip")
				got := do(t, req)
				zr, err := gzip.NewReader(bytes.NewReader(got.Body))
				if err != nil {
					t.Fatal(err)
				}
				plain, _ := io.ReadAll(zr)
				mustHave(t, plain, "cc="+f.number)
				if got.Header.Get("Content-Length") != "" && got.Header.Get("Content-Length") != fmt.Sprint(len(got.Body)) {
					t.Fatal("Content-Length not fixed")
				}
			})
			t.Run("raw token is substituted when bound", func(t *testing.T) {
				req, _ := http.NewRequest("POST", f.url("/tok"), strings.NewReader("cc="+tok("card", "1", "number")))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				got := do(t, req)
				mustHave(t, got.Body, "cc="+f.number)
			})
			before := f.up.count()
			t.Run("unbound token refused", func(t *testing.T) {
				req, _ := http.NewRequest("POST", f.url("/x"), strings.NewReader("cc="+tok("card", "2", "number")))
				resp, err := f.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "token_not_authorized" {
					t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
				}
			})
			t.Run("body over the cap", func(t *testing.T) {
				req, _ := http.NewRequest("POST", f.url("/big"), bytes.NewReader(make([]byte, 11<<20)))
				resp, err := f.client.Do(req)
				if err != nil {
					t.Skipf("client saw the refusal as a broken pipe: %v", err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestEntityTooLarge || codeOf(resp) != "body_too_large" {
					t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
				}
			})
			if f.up.count() != before {
				t.Fatal("a refused request reached the upstream")
			}
		})
	}
}

func TestP12_AuditFailureRefusesSubstitution(t *testing.T) {
	f := newSubFixture(t, false, nil)
	if f.e.vault.audits(broker.PurposeAuthorize) != 3 {
		t.Fatalf("authorize releases audited: %d", f.e.vault.audits(broker.PurposeAuthorize))
	}
	subs := f.e.vault.audits(broker.PurposeSubstitute) // the fixture's delivery
	req, _ := http.NewRequest("POST", f.url("/pay"), strings.NewReader("cc="+f.numSI))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f.e.vault.audits(broker.PurposeSubstitute) != subs+1 {
		t.Fatal("substitution not audited")
	}
	f.e.vault.failAudit.Store(true)
	before := f.up.count()
	req, _ = http.NewRequest("POST", f.url("/pay"), strings.NewReader("cc="+f.numSI))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "audit_unavailable" || f.up.count() != before {
		t.Fatalf("audit failure: code %q, upstream %d→%d", codeOf(resp), before, f.up.count())
	}
}

func TestP10_RealValuesScrubbedFromResponses(t *testing.T) {
	var f *subFixture
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := f.number
		spaced := n[:4] + " " + n[4:8] + " " + n[8:12] + " " + n[12:]
		switch r.URL.Path {
		case "/echo":
			_, _ = w.Write([]byte("you sent: "))
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
		case "/encodings":
			fmt.Fprintf(w, "raw=%s spaced=%s dashed=%s b64=%s json=%s html=%s pct=%s",
				n, spaced, strings.ReplaceAll(spaced, " ", "-"), base64.StdEncoding.EncodeToString([]byte(f.passwd)),
				mustJSON(f.passwd), htmlEsc(f.passwd), url.QueryEscape(f.passwd))
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz([]byte("number " + n + " pw " + f.passwd)))
		case "/headers":
			w.Header().Set("Location", "https://shop.test/done?cc="+n)
			w.Header().Set("Set-Cookie", "last="+url.QueryEscape(f.passwd))
			w.Header().Set("X-Echo", n)
			w.WriteHeader(http.StatusFound)
		case "/big":
			// A value split across write boundaries of a streamed body.
			fl := w.(http.Flusher)
			for i := 0; i < 2000; i++ {
				_, _ = w.Write([]byte(strings.Repeat("x", 97) + n[:5]))
				fl.Flush()
				_, _ = w.Write([]byte(n[5:]))
			}
		}
	}
	f = newSubFixture(t, false, handler)
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		for _, path := range []string{"/echo", "/encodings", "/gzip", "/headers", "/big"} {
			t.Run(fmt.Sprintf("%s h2=%v", path, h2), func(t *testing.T) {
				req, _ := http.NewRequest("POST", f.url(path), strings.NewReader("cc="+f.numSI+"&pw="+url.QueryEscape(f.passSI)))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, resp.Body)
				resp.Body.Close()
				var all strings.Builder
				all.WriteString(body)
				for k, vs := range resp.Header {
					all.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
				}
				leakcheck.New(leakcheck.Value("card number", f.number), leakcheck.Value("password", f.passwd)).
					Text(t, fmt.Sprintf("the browser's response (status %d)", resp.StatusCode), []byte(all.String()))
				if path == "/echo" && !strings.Contains(body, f.numSI) {
					t.Fatal("echo did not come back with the stand-in")
				}
				if path == "/headers" && !strings.Contains(resp.Header.Get("Location"), f.numSI) {
					t.Fatal("Location not rewritten to the stand-in")
				}
			})
		}
	}
}

func mustJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

func htmlEsc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// wholeField reports whether v occurs in b not bounded by a letter or digit.
func wholeField(b []byte, v string) bool {
	isWord := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(v))
		if j < 0 {
			return false
		}
		j += i
		end := j + len(v)
		if (j == 0 || !isWord(b[j-1])) && (end == len(b) || !isWord(b[end])) {
			return true
		}
		i = j + 1
	}
}

// TestRenewedGrantsStillSubstitute: each authorize renews the session's
// grants (a new version, the same tokens and stand-ins), and the proxy
// keeps its request matchers for the same values: the stand-ins sent after
// each renewal still go upstream as the real values, every one of them.
func TestRenewedGrantsStillSubstitute(t *testing.T) {
	f := newSubFixture(t, false, nil)
	for i := range 3 {
		f.reauth(t)
		body := url.Values{"n": {f.numSI}, "c": {f.cvvSI}, "p": {f.passSI}}.Encode()
		resp, err := f.client.Post(f.url("/pay"), "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := url.Values{"n": {f.number}, "c": {f.cvv}, "p": {f.passwd}}.Encode()
		if code := codeOf(resp); code != "" || string(f.up.last().Body) != want {
			t.Fatalf("renewal %d: code %q, the site got other than the real values", i, code)
		}
	}
}
