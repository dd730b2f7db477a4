package intercept_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
)

// TestP16_ConnectToUnspecifiedAddressIsALoop: a CONNECT to 0.0.0.0 or [::]
// on the proxy's own port reaches the proxy (the kernel routes the
// unspecified address to this host), so it is refused as a loop even when
// private ranges are allowed for tests.
func TestP16_ConnectToUnspecifiedAddressIsALoop(t *testing.T) {
	e := startProxy(t, nil) // private ranges allowed: the loop rule holds anyway
	s, pw := e.session()
	_, port, _ := net.SplitHostPort(e.addr)
	for _, authority := range []string{"0.0.0.0:" + port, "[::]:" + port, "[::ffff:0.0.0.0]:" + port} {
		_, _, resp := e.connect(t, s, pw, authority)
		if resp.StatusCode != http.StatusForbidden || codeOf(resp) != "proxy_loop" {
			t.Errorf("CONNECT %s: %d %s, want 403 proxy_loop", authority, resp.StatusCode, codeOf(resp))
		}
	}

	d := &intercept.Dialer{UnsafeAllowPrivateRanges: true}
	d.AddSelf(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7700})
	for _, tc := range []struct {
		host string
		port int
		code agentvault.Code
	}{
		{"0.0.0.0", 7700, agentvault.CodeProxyLoop},
		{"::", 7700, agentvault.CodeProxyLoop},
		{"127.0.0.1", 7700, agentvault.CodeProxyLoop},
		{"0.0.0.0", 7701, ""}, // another port: not us (private ranges allowed here)
	} {
		_, err := d.Vet(context.Background(), intercept.Destination{Host: tc.host, Port: tc.port})
		if got := agentvault.ErrorCode(err); got != tc.code {
			t.Errorf("Vet(%s:%d) = %q, want %q", tc.host, tc.port, got, tc.code)
		}
	}
	strict := &intercept.Dialer{}
	strict.AddSelf(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7700})
	if _, err := strict.Vet(context.Background(), intercept.Destination{Host: "0.0.0.0", Port: 7701}); agentvault.ErrorCode(err) != agentvault.CodePrivateDestination {
		t.Errorf("unspecified address on another port without the test exception: %v", err)
	}
	if !intercept.IsPrivateAddr(netip.MustParseAddr("::")) {
		t.Error(":: is not private")
	}
}
