package proxyd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
)

// TestSeed000_LoginDiagnosticReachesTheOwner: the reference of a capture
// browser_login kept (seed 000, "devolve apenas a referência do artifact
// no evento") travels as the session's event over the control API, and
// the owner finds it on the dashboard's Activity page and in proxyd's log.
// The event carries nothing but a reference, a label, a host and an
// outcome: anything else in those fields is refused and recorded nowhere.
func TestSeed000_LoginDiagnosticReachesTheOwner(t *testing.T) {
	m, logs := startMain(t, "", func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	ctx := context.Background()
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	ref := control.NewLoginArtifact()
	ev := control.EventRequest{Type: control.EventLoginDiagnostic, Login: "portal", Site: "Portal.Example.COM",
		Outcome: "refused", Artifact: ref}
	if err := c.Event(ctx, s.ID, ev); err != nil {
		t.Fatal(err)
	}

	const smuggled = "Hunter2-Smuggled-Value-9"
	for name, bad := range map[string]control.EventRequest{
		"a path for an artifact": {Type: control.EventLoginDiagnostic, Outcome: "refused", Site: "portal.example.com", Artifact: "../" + smuggled + ".png"},
		"free text for an outcome": {Type: control.EventLoginDiagnostic, Outcome: smuggled, Site: "portal.example.com",
			Artifact: control.NewLoginArtifact()},
		"a value for a login": {Type: control.EventLoginDiagnostic, Outcome: "refused", Login: smuggled + " x", Site: "portal.example.com",
			Artifact: control.NewLoginArtifact()},
		"a URL with a query for a site": {Type: control.EventLoginDiagnostic, Outcome: "refused", Site: "https://portal.example.com/?pw=" + smuggled,
			Artifact: control.NewLoginArtifact()},
	} {
		if err := c.Event(ctx, s.ID, bad); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Errorf("%s: %v, want invalid_input", name, err)
		}
	}

	d := signIn(t, m)
	_, _, page := d.status(http.MethodGet, "/activity", nil)
	for _, want := range []string{"Sign-ins that did not succeed", ref, "portal.example.com", "refused", s.ID} {
		if !strings.Contains(page, want) {
			t.Errorf("the Activity page does not show %q", want)
		}
	}
	if n := len(regexp.MustCompile(`login-[0-9a-f]{16}\.png`).FindAllString(page, -1)); n != 1 {
		t.Errorf("the Activity page lists %d captures, want the one event that passed", n)
	}
	logged := false
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "login diagnostic kept" {
			logged = logged || rec["artifact"] == ref && rec["session"] == s.ID
		}
	}
	if !logged {
		t.Error("proxyd's log does not record the capture's reference")
	}
	if strings.Contains(page, smuggled) {
		t.Error("a refused event's text reached the Activity page")
	}
}
