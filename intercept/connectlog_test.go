package intercept_test

import (
	"strings"
	"testing"
)

// TestRefusedConnectNamesItsDestination: the log line of a refused CONNECT
// names the destination, so an operator sees which host did not resolve or
// was private (issue 13).
func TestRefusedConnectNamesItsDestination(t *testing.T) {
	e := startProxy(t, nil)
	s, pw := e.session()
	_, _, resp := e.connect(t, s, pw, "nowhere.invalid:443")
	if resp.StatusCode == 200 {
		t.Fatal("a CONNECT to a name that does not resolve was accepted")
	}
	if !strings.Contains(e.logs.String(), `"host":"nowhere.invalid:443"`) {
		t.Fatalf("the refusal does not name its destination: %s", e.logs.String())
	}
}
