package proxyd

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// TestConnectedApps_ReportListEnd: mcpd's report over the control API
// lists a key's open sessions for the dashboard (never another key's
// session, never a closed one); the owner's End closes the proxy session,
// the next report names it ended, and its final report is still readable
// (Report marked ended, CloseSession answering it).
func TestConnectedApps_ReportListEnd(t *testing.T) {
	b, err := broker.New(broker.Config{Vault: emptyVault{}, Authorizer: refuseFills{}, LookupKey: func(ctx context.Context, key string) (broker.APIKey, error) {
		switch key {
		case "avk_a":
			return broker.APIKey{ID: "key_a"}, nil
		case "avk_b":
			return broker.APIKey{ID: "key_b"}, nil
		}
		return broker.APIKey{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
	}})
	if err != nil {
		t.Fatal(err)
	}
	ended := newEndedReports(nil)
	b.OnClose(func(s *broker.Session) { ended.add(s.ID, s.Key.ID, s.Report()) })
	reg := apps.New(brokerSessions{b}, nil)
	srv := httptest.NewServer(control.NewHandler(&controlService{broker: b, apps: reg, ended: ended}, "tok", nil))
	defer srv.Close()
	ctl := control.NewClient(srv.URL, "tok", nil)
	ctx := context.Background()

	a1, _, _ := b.Create(ctx, "avk_a")
	a2, _, _ := b.Create(ctx, "avk_a")
	bOnly, _, _ := b.Create(ctx, "avk_b")
	now := time.Now().UTC()
	resp, err := ctl.ReportAppSessions(ctx, control.AppSessionsRequest{APIKey: "avk_a", Sessions: []control.AppSession{
		{ID: a1.ID, HandlePrefix: "s_aaaa11", Started: now, LastUsed: now, PageHost: "shop.example"},
		{ID: a2.ID, HandlePrefix: "s_aaaa22", Started: now, LastUsed: now},
		{ID: bOnly.ID, HandlePrefix: "s_bbbb11", Started: now, LastUsed: now}, // another key's
		{ID: "s_nosuch", HandlePrefix: "s_zzzz", Started: now, LastUsed: now},
	}})
	if err != nil || len(resp.Ended) != 0 {
		t.Fatalf("report: %+v %v", resp, err)
	}
	if _, err := ctl.ReportAppSessions(ctx, control.AppSessionsRequest{APIKey: "avk_nope"}); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Fatalf("unknown key: %v", err)
	}
	// Another connection on the same key reports nothing: the list stays.
	if _, err := ctl.ReportAppSessions(ctx, control.AppSessionsRequest{APIKey: "avk_a", Sessions: []control.AppSession{}}); err != nil {
		t.Fatal(err)
	}
	list := reg.ConnectedApps()
	if len(list) != 1 || list[0].KeyID != "key_a" || len(list[0].Sessions) != 2 {
		t.Fatalf("listed: %+v", list)
	}
	if err := reg.EndAppSession(bOnly.ID); agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		t.Fatalf("ending an unlisted session: %v", err)
	}
	if err := reg.EndAppSession(a1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(a1.ID); err == nil {
		t.Fatal("the owner's End left the proxy session open")
	}
	if got := reg.ConnectedApps(); len(got) != 1 || len(got[0].Sessions) != 1 || got[0].Sessions[0].ID != a2.ID {
		t.Fatalf("after End: %+v", got)
	}
	resp, err = ctl.ReportAppSessions(ctx, control.AppSessionsRequest{APIKey: "avk_a", Sessions: []control.AppSession{
		{ID: a1.ID, HandlePrefix: "s_aaaa11", Started: now, LastUsed: now},
		{ID: a2.ID, HandlePrefix: "s_aaaa22", Started: now, LastUsed: now},
	}})
	if err != nil || len(resp.Ended) != 1 || resp.Ended[0] != a1.ID {
		t.Fatalf("report after End: %+v %v", resp, err)
	}
	rep, err := ctl.Report(ctx, a1.ID)
	if err != nil || !rep.Ended {
		t.Fatalf("report of the ended session: %+v %v", rep, err)
	}
	if cr, err := ctl.CloseSession(ctx, a1.ID); err != nil || cr.Status != "Session closed" {
		t.Fatalf("close of the ended session: %+v %v", cr, err)
	}
	if rep, err := ctl.Report(ctx, a2.ID); err != nil || rep.Ended {
		t.Fatalf("report of the open session: %+v %v", rep, err)
	}
}

// emptyVault holds nothing; refuseFills refuses every fill. The sessions
// of TestConnectedApps_ReportListEnd fill nothing.
type (
	emptyVault  struct{}
	refuseFills struct{}
)

func (emptyVault) List(context.Context, string) ([]vault.Item, error) { return nil, nil }
func (emptyVault) GetByLabel(context.Context, string, vault.Kind, string) (vault.Item, error) {
	return vault.Item{}, vault.ErrNotFound
}
func (emptyVault) Release(context.Context, broker.ReleaseArgs) (vault.Secret, error) {
	return vault.Secret{}, vault.ErrNotFound
}
func (refuseFills) Authorize(context.Context, policy.Fill) error {
	return agentvault.Errorf(agentvault.CodeScopeDenied, "no fills here")
}
func (refuseFills) Recheck(context.Context, policy.Fill) error {
	return agentvault.Errorf(agentvault.CodeScopeDenied, "no fills here")
}
