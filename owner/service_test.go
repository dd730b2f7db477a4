package owner_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// clock is a settable test clock: no test here depends on wall time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var fastPW = owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1}

func newService(t *testing.T, path string, c *clock) *owner.Service {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "vault.db")
	}
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := owner.New(owner.Config{Store: st, Org: "o", Now: c.Now, Password: fastPW, PollEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)} }

func TestAPIKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "", newClock())
	k, key, err := s.CreateAPIKey(ctx, "shopping agent", owner.Scope{CardIDs: []string{"itm_1", "itm_1", " "}, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.ID, "avk_") || !strings.HasPrefix(key, k.ID+"_") || len(key) != len(k.ID)+1+64 {
		t.Fatalf("key shape: id %q, key length %d", k.ID, len(key))
	}
	info, err := s.Authenticate(ctx, key)
	if err != nil || info.ID != k.ID || info.Scope.AllCards || len(info.Scope.CardIDs) != 1 || !info.Scope.AllLogins || info.Revoked {
		t.Fatalf("authenticate: %+v %v", info, err)
	}
	wrong := key[:len(key)-1] + map[bool]string{true: "0", false: "1"}[key[len(key)-1] != '0']
	for name, bad := range map[string]string{"wrong secret": wrong, "garbage": "avk_x", "empty": "", "unknown id": "avk_0000000000000000" + key[len(k.ID):]} {
		if _, err := s.Authenticate(ctx, bad); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := s.SetScope(ctx, k.ID, owner.Scope{AllCards: true, CanCreateLogins: true}); err != nil {
		t.Fatal(err)
	}
	info, _ = s.KeyInfo(ctx, k.ID)
	if !info.Scope.AllCards || info.Scope.AllLogins || !info.CanCreateLogins {
		t.Fatalf("scope: %+v", info)
	}
	if err := s.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, key); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("revoked: %v", err)
	}
	if _, err := s.Authenticate(ctx, wrong); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Fatalf("revoked key with a wrong secret must not say revoked: %v", err)
	}
}

func TestApprovalWaitWokenByDecision(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "", newClock())
	a, err := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "Shop.Example.", APIKeyID: "avk_1", Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Site != "shop.example" || a.Status != owner.StatusPending {
		t.Fatalf("requested: %+v", a)
	}
	go func() {
		// Decide once the waiter is parked (or before: both must work).
		if _, err := s.Decide(ctx, a.ID, true, "owner:me@example.com"); err != nil {
			t.Errorf("decide: %v (%v)", err, errors.Unwrap(err))
		}
	}()
	got, err := s.WaitApproval(ctx, a.ID, time.Minute)
	if err != nil || got.Status != owner.StatusApproved || got.Outcome() != nil {
		t.Fatalf("wait: %+v %v", got, err)
	}
	auth, _ := s.AuthorizedDestinations(ctx)
	if !auth["shop.example"] {
		t.Fatalf("an approved new destination is authorized: %v", auth)
	}
}

// TestApprovalWaitAcrossProcesses decides through a second Service on the
// same database file: the waiter sees it by re-reading the store.
func TestApprovalWaitAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vault.db")
	c := newClock()
	proxyd := newService(t, path, c)
	dashboard := newService(t, path, c)
	a, err := proxyd.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(policy.ReasonOverThreshold),
		Site: "shop.example", CardID: "itm_c", Amount: ptr(policy.MustAmount("80.00 EUR")), APIKeyID: "avk_1", Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan owner.Approval)
	go func() {
		got, err := proxyd.WaitApproval(ctx, a.ID, time.Minute)
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		done <- got
	}()
	if _, err := dashboard.Decide(ctx, a.ID, false, "owner:me@example.com"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Status != owner.StatusDenied || agentvault.ErrorCode(got.Outcome()) != agentvault.CodeApprovalDenied {
		t.Fatalf("got %+v", got)
	}
	if _, err := dashboard.Decide(ctx, a.ID, true, "owner:me@example.com"); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("second decision: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestApprovalExpiry(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := newService(t, "", c)
	a, err := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindCVVEntry, Reason: "cvv_entry", Site: "shop.example", CardID: "itm_c", Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Expires.Equal(c.Now().Add(policy.DestinationApprovalWait)) {
		t.Fatalf("expires %v", a.Expires)
	}
	// Still pending when the wait bound passes.
	got, err := s.WaitApproval(ctx, a.ID, 10*time.Millisecond)
	if err != nil || got.Status != owner.StatusPending {
		t.Fatalf("short wait: %+v %v", got, err)
	}
	c.Add(policy.DestinationApprovalWait)
	got, err = s.WaitApproval(ctx, a.ID, time.Minute)
	if err != nil || got.Status != owner.StatusExpired || agentvault.ErrorCode(got.Outcome()) != agentvault.CodeCVVEntryRequired {
		t.Fatalf("after expiry: %+v %v", got, err)
	}
	if _, err := s.Decide(ctx, a.ID, true, "owner"); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("deciding an expired approval: %v", err)
	}
	// The sweeper expires what nobody waits on.
	b, _ := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "b.example"})
	c.Add(time.Hour)
	if n, err := s.SweepExpired(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if got, _ := s.Approval(ctx, b.ID); got.Status != owner.StatusExpired || agentvault.ErrorCode(got.Outcome()) != agentvault.CodeDestinationUnauthorized {
		t.Fatalf("swept: %+v", got)
	}
}

func TestApprovalDedupe(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "", newClock())
	req := owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: "over_threshold", Site: "shop.example", CardID: "itm_c",
		Amount: ptr(policy.MustAmount("80.00 EUR")), APIKeyID: "avk_1", Session: "s_1"}
	a, _ := s.RequestApproval(ctx, req)
	b, _ := s.RequestApproval(ctx, req)
	if a.ID != b.ID {
		t.Fatalf("identical pending requests got %s and %s", a.ID, b.ID)
	}
	other := req
	other.Amount = ptr(policy.MustAmount("81.00 EUR"))
	c, _ := s.RequestApproval(ctx, other)
	if c.ID == a.ID {
		t.Fatal("a different amount is a different question")
	}
	// New sites are one question whichever session asks.
	d1, _ := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "new.example", Session: "s_1"})
	d2, _ := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "new.example", Session: "s_2"})
	if d1.ID != d2.ID {
		t.Fatal("new destination asked twice")
	}
	p, _ := s.Pending(ctx)
	if len(p) != 3 {
		t.Fatalf("%d pending, want 3", len(p))
	}
}

// TestFillArgsAndReserve runs the proxy's intended sequence: fill the
// args from the store, decide, ask the owner, decide again, reserve.
func TestFillArgsAndReserve(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "", newClock())
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber}, Card: &vault.CardMeta{AnySite: true}}
	if err := s.SetCardPolicy(ctx, owner.CardPolicy{CardID: "itm_c", Rules: policy.CardPolicy{
		ApprovalThreshold: ptr(policy.MustAmount("50.00 EUR")), DailyCap: ptr(policy.MustAmount("100.00 EUR"))}}, "owner"); err != nil {
		t.Fatal(err)
	}
	if err := s.AuthorizeSite(ctx, "shop.example", "owner"); err != nil {
		t.Fatal(err)
	}
	eng := policy.NewEngine(policy.Rates{}, func(h string) (string, error) {
		parts := strings.Split(h, ".")
		return strings.Join(parts[len(parts)-2:], "."), nil
	})
	total := policy.MustAmount("80.00 EUR")
	base := policy.Args{APIKey: policy.KeyInfo{ID: "avk_1", Scope: policy.KeyScope{AllCards: true}}, Item: card, Field: vault.FieldNumber, Destination: "pay.shop.example", Total: &total}
	args, err := s.FillArgs(ctx, base, "s_1")
	if err != nil {
		t.Fatal(err)
	}
	d := eng.Decide(ctx, args)
	if !d.NeedsOwner || d.Reason != policy.ReasonOverThreshold {
		t.Fatalf("first decision: %+v", d)
	}
	a, err := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(d.Reason), Site: d.Site, CardID: card.ID, Amount: &total, APIKeyID: "avk_1", Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, a.ID, true, "owner"); err != nil {
		t.Fatal(err)
	}
	args, _ = s.FillArgs(ctx, base, "s_1")
	d = eng.Decide(ctx, args)
	if !d.Allow || d.Charge == nil {
		t.Fatalf("after approval: %+v", d)
	}
	for range 2 { // a retried authorize reserves once (P20)
		if err := s.Reserve(ctx, a.ID, card.ID, *d.Charge); err != nil {
			t.Fatal(err)
		}
	}
	args, _ = s.FillArgs(ctx, base, "s_1")
	if args.SpentToday != total {
		t.Fatalf("spent today %s", args.SpentToday)
	}
	// A second purchase of 80 breaks the daily cap of 100.
	if d := eng.Decide(ctx, args); d.Allow || d.Code != agentvault.CodeDailyLimit {
		t.Fatalf("over the daily cap: %+v", d)
	}
	if err := s.Reserve(ctx, "other-auth", card.ID, total); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("ledger refuses too: %v", err)
	}
}

func TestOwnerPasswordAndSessions(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := newService(t, "", c)
	if ok, _ := s.HasOwner(ctx); ok {
		t.Fatal("fresh store has an owner")
	}
	if err := s.SetOwnerPassword(ctx, "Me@Example.com", "short"); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("short password: %v", err)
	}
	const pw = "correct horse battery staple"
	if err := s.SetOwnerPassword(ctx, "Me@Example.com", pw); err != nil {
		t.Fatal(err)
	}
	a, err := s.Store().GetAccount(ctx, "me@example.com")
	if err != nil || !strings.HasPrefix(a.PasswordHash, "$argon2id$v=19$m=1024,t=1,p=1$") || strings.Contains(a.PasswordHash, pw) {
		t.Fatalf("stored hash has the wrong shape (len %d): %v", len(a.PasswordHash), err)
	}
	if _, err := s.CheckOwnerPassword(ctx, "me@example.com", pw); err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][2]string{{"me@example.com", pw + "x"}, {"other@example.com", pw}, {"", ""}} {
		if _, err := s.CheckOwnerPassword(ctx, tc[0], tc[1]); agentvault.ErrorCode(err) != agentvault.CodeUnauthorized {
			t.Fatalf("bad sign-in accepted: %v", err)
		}
	}
	tok, _, err := s.NewDashSession(ctx, "me@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DashSession(ctx, tok); err != nil {
		t.Fatal(err)
	}
	c.Add(13 * time.Hour)
	if _, err := s.DashSession(ctx, tok); agentvault.ErrorCode(err) != agentvault.CodeUnauthorized {
		t.Fatalf("expired session: %v", err)
	}
	tok, _, _ = s.NewDashSession(ctx, "me@example.com")
	if err := s.SetOwnerPassword(ctx, "me@example.com", pw+"!"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DashSession(ctx, tok); agentvault.ErrorCode(err) != agentvault.CodeUnauthorized {
		t.Fatalf("a password change ends sessions: %v", err)
	}
}

// TestSweeperWakesWaiter: nobody decides; the background sweeper expires
// the approval once the (test) clock passes its expiry and the waiter
// returns expired.
func TestSweeperWakesWaiter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClock()
	s := newService(t, "", c)
	a, err := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "slow.example"})
	if err != nil {
		t.Fatal(err)
	}
	go s.RunSweeper(ctx, 5*time.Millisecond)
	c.Add(policy.DestinationApprovalWait + time.Second)
	got, err := s.WaitApproval(ctx, a.ID, time.Minute)
	if err != nil || got.Status != owner.StatusExpired {
		t.Fatalf("%+v %v", got, err)
	}
	if c := agentvault.ErrorCode(got.Outcome()); c != agentvault.CodeDestinationUnauthorized {
		t.Fatalf("outcome %s", c)
	}
}
