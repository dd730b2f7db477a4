package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/notify"
	"github.com/agentvault/agentvault/store/sqlite"
)

// TestServiceNotifiesOnNewApproval wires the webhook into owner.Service: a
// new approval is posted once (a deduplicated repeat is not), signed.
func TestServiceNotifiesOnNewApproval(t *testing.T) {
	secret := []byte("whsec-service-test")
	got := make(chan notify.Payload, 4)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !notify.Verify(secret, body, r.Header.Get(notify.SignatureHeader)) {
			t.Errorf("bad signature")
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		got <- p
	}))
	defer srv.Close()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := owner.New(owner.Config{Store: st, Org: "o", DashboardURL: "https://127.0.0.1:7703/",
		Notifier: &notify.Webhook{URL: srv.URL, Secret: secret, Client: srv.Client()},
		Password: owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "shop.example"}
	a, _ := svc.RequestApproval(ctx, req)
	if _, err := svc.RequestApproval(ctx, req); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p.ApprovalID != a.ID || p.Event != owner.EventApprovalRequested || p.Dashboard != "https://127.0.0.1:7703/" {
		t.Fatalf("payload %+v", p)
	}
	if _, err := svc.Decide(ctx, a.ID, false, "owner"); err != nil {
		t.Fatal(err)
	}
	p = <-got
	if p.Event != owner.EventApprovalDecided || p.Status != "denied" {
		t.Fatalf("decided payload %+v", p)
	}
	select {
	case extra := <-got:
		t.Fatalf("the deduplicated request notified again: %+v", extra)
	case <-time.After(50 * time.Millisecond):
	}
}
