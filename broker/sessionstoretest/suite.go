// Package sessionstoretest is the conformance suite every
// broker.SessionStore passes (store/sqlite, store/postgres): sessions and
// their ends, grants and the use rule's transitions, and a one-purchase
// grant's claim, atomic when many claim at once (P21).
//
// It is test support only: never imported by a production package.
package sessionstoretest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Run runs the suite. open returns a fresh, empty store.
func Run(t *testing.T, open func(t *testing.T) broker.SessionStore) {
	t.Run("SessionRoundTrip", func(t *testing.T) { sessionRoundTrip(t, open(t)) })
	t.Run("EndSession", func(t *testing.T) { endSession(t, open(t)) })
	t.Run("PurgeSessions", func(t *testing.T) { purgeSessions(t, open(t)) })
	t.Run("CountOpenSessions", func(t *testing.T) { countOpenSessions(t, open(t)) })
	t.Run("GrantTransitions", func(t *testing.T) { grantTransitions(t, open(t)) })
	t.Run("P21_ClaimRule", func(t *testing.T) { claimRule(t, open(t)) })
	t.Run("P21_ClaimLeaseRunsOutAsUsed", func(t *testing.T) { claimLease(t, open(t)) })
	t.Run("P21_ConcurrentClaimsOneWins", func(t *testing.T) { concurrentClaims(t, open(t)) })
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newSession(t *testing.T, st broker.SessionStore, id string) broker.SessionRecord {
	t.Helper()
	r := broker.SessionRecord{ID: id, Key: broker.APIKey{ID: "key_1", Org: "org", Suffix: "u7x2k"},
		PwdHash: sha256.Sum256([]byte("pw-" + id)), Created: t0, LastUsed: t0}
	if err := st.CreateSession(context.Background(), r); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return r
}

func cardGrant(session string) broker.GrantRecord {
	return broker.GrantRecord{Session: session, Token: "av_card_1_number_u7x2k", StandIn: standIn("0"),
		ItemID: "itm_1", Kind: vault.KindCard, Label: "1", Field: vault.FieldNumber,
		Origins:  []hostname.Origin{{Host: "shop.example", Port: 443}, {Host: "pay.example", Port: 8443}},
		Expires:  t0.Add(5 * time.Minute),
		Total:    &policy.Amount{Minor: 1234, Currency: "EUR"},
		Purchase: 0, OnePurchase: true}
}

func code(err error) agentvault.Code { return agentvault.ErrorCode(err) }

func sessionRoundTrip(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	want := newSession(t, st, "s_a")
	scoped := broker.SessionRecord{ID: "s_b", Key: broker.APIKey{ID: "key_2", Org: "org", Suffix: "abcde",
		Scope: policy.KeyScope{CardIDs: []string{"itm_1"}, AllLogins: true}}, Created: t0, LastUsed: t0}
	if err := st.CreateSession(ctx, scoped); err != nil {
		t.Fatal(err)
	}
	got, grants, err := st.GetSession(ctx, "s_a")
	if err != nil || len(grants) != 0 {
		t.Fatalf("GetSession: %v, %d grants", err, len(grants))
	}
	if got.ID != want.ID || !reflect.DeepEqual(got.Key, want.Key) || got.PwdHash != want.PwdHash || !got.Created.Equal(t0) ||
		!got.LastUsed.Equal(t0) || !got.Ended.IsZero() {
		t.Fatalf("session round trip: got %+v", got)
	}
	got, _, err = st.GetSession(ctx, "s_b")
	if err != nil || got.Key.Scope.AllCards || !got.Key.Scope.AllLogins ||
		len(got.Key.Scope.CardIDs) != 1 || got.Key.Scope.CardIDs[0] != "itm_1" {
		t.Fatalf("scope round trip: %+v, %v", got.Key.Scope, err)
	}
	if err := st.CreateSession(ctx, want); code(err) != agentvault.CodeConflict {
		t.Fatalf("a second session with one id: %v, want conflict", err)
	}
	if _, _, err := st.GetSession(ctx, "s_nope"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("unknown session: %v, want not found", err)
	}
	if err := st.TouchSession(ctx, "s_a", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.TouchSession(ctx, "s_a", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.GetSession(ctx, "s_a"); !got.LastUsed.Equal(t0.Add(time.Minute)) {
		t.Fatalf("last use %v, want the later touch", got.LastUsed)
	}
}

func endSession(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	newSession(t, st, "s_e")
	if _, err := st.PutGrant(ctx, cardGrant("s_e")); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSession(ctx, "s_e", "closed", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSession(ctx, "s_e", "idle", t0.Add(2*time.Minute)); err != nil {
		t.Fatalf("a second end: %v", err)
	}
	got, grants, err := st.GetSession(ctx, "s_e")
	if err != nil || !got.Ended.Equal(t0.Add(time.Minute)) || got.EndReason != "closed" || len(grants) != 0 {
		t.Fatalf("ended session: %+v, %d grants, %v", got, len(grants), err)
	}
	if _, err := st.PutGrant(ctx, cardGrant("s_e")); code(err) != agentvault.CodeSessionEnded {
		t.Fatalf("grant on an ended session: %v", err)
	}
	if _, err := st.PutGrant(ctx, cardGrant("s_none")); code(err) != agentvault.CodeSessionEnded {
		t.Fatalf("grant on an unknown session: %v", err)
	}
	err = st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_e", Token: cardGrant("").Token, Claim: "c1", Now: t0, Until: t0.Add(time.Minute)})
	if code(err) != agentvault.CodeSessionEnded {
		t.Fatalf("claim on an ended session: %v", err)
	}
}

// purgeSessions: a session goes, with its grants, when it ended, was last
// used or was created before the matching cut-off; every other one stays.
func purgeSessions(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	h := time.Hour
	mk := func(id string, created, used time.Time) {
		r := broker.SessionRecord{ID: id, Key: broker.APIKey{ID: "key_1", Org: "org", Suffix: "u7x2k"},
			PwdHash: sha256.Sum256([]byte("pw-" + id)), Created: created, LastUsed: used}
		if err := st.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutGrant(ctx, cardGrant(id)); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(100 * h)
	mk("s_ended_long_ago", now.Add(-10*h), now.Add(-9*h))
	mk("s_ended_lately", now.Add(-10*h), now.Add(-2*time.Minute))
	mk("s_idle", now.Add(-10*h), now.Add(-5*h))
	mk("s_old", now.Add(-20*h), now.Add(-time.Minute))
	mk("s_live", now.Add(-2*h), now.Add(-time.Minute))
	if err := st.EndSession(ctx, "s_ended_long_ago", "closed", now.Add(-3*h)); err != nil {
		t.Fatal(err)
	}
	if err := st.EndSession(ctx, "s_ended_lately", "closed", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	n, err := st.PurgeSessions(ctx, broker.PurgeArgs{EndedBefore: now.Add(-h), UsedBefore: now.Add(-4 * h), CreatedBefore: now.Add(-15 * h)})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{"s_ended_long_ago": true, "s_idle": true, "s_old": true}
	if n != int64(len(gone)) {
		t.Fatalf("purged %d sessions, want %d", n, len(gone))
	}
	for _, id := range []string{"s_ended_long_ago", "s_ended_lately", "s_idle", "s_old", "s_live"} {
		r, grants, err := st.GetSession(ctx, id)
		switch {
		case gone[id] && !errors.Is(err, vault.ErrNotFound):
			t.Fatalf("%s after the purge: %+v, %v; want not found", id, r, err)
		case !gone[id] && (err != nil || id == "s_live" && len(grants) != 1):
			t.Fatalf("%s after the purge: %d grants, %v; want it kept", id, len(grants), err)
		}
	}
	// A grant of a purged session is refused like one of an ended session.
	if _, err := st.PutGrant(ctx, cardGrant("s_idle")); code(err) != agentvault.CodeSessionEnded {
		t.Fatalf("grant on a purged session: %v", err)
	}
	if n, err := st.PurgeSessions(ctx, broker.PurgeArgs{EndedBefore: now.Add(-h), UsedBefore: now.Add(-4 * h), CreatedBefore: now.Add(-15 * h)}); err != nil || n != 0 {
		t.Fatalf("a second purge: %d, %v", n, err)
	}
}

// countOpenSessions: a key's sessions that are not ended, idle or too
// old, and only that key's.
func countOpenSessions(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	h := time.Hour
	now := t0.Add(100 * h)
	mk := func(id, key string, created, used time.Time) {
		r := broker.SessionRecord{ID: id, Key: broker.APIKey{ID: key, Org: "org", Suffix: "u7x2k"},
			PwdHash: sha256.Sum256([]byte("pw-" + id)), Created: created, LastUsed: used}
		if err := st.CreateSession(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mk("s_open", "key_1", now.Add(-h), now.Add(-time.Minute))
	mk("s_open2", "key_1", now.Add(-2*h), now.Add(-10*time.Minute))
	mk("s_ended", "key_1", now.Add(-h), now.Add(-time.Minute))
	mk("s_idle", "key_1", now.Add(-h), now.Add(-40*time.Minute))
	mk("s_old", "key_1", now.Add(-9*h), now.Add(-time.Minute))
	mk("s_other", "key_2", now.Add(-h), now.Add(-time.Minute))
	if err := st.EndSession(ctx, "s_ended", "closed", now); err != nil {
		t.Fatal(err)
	}
	n, err := st.CountOpenSessions(ctx, "key_1", now.Add(-30*time.Minute), now.Add(-8*h))
	if err != nil || n != 2 {
		t.Fatalf("open sessions of key_1: %d, %v; want 2", n, err)
	}
	if n, err := st.CountOpenSessions(ctx, "key_3", now.Add(-30*time.Minute), now.Add(-8*h)); err != nil || n != 0 {
		t.Fatalf("open sessions of an unknown key: %d, %v", n, err)
	}
}

func grantTransitions(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	newSession(t, st, "s_g")
	g := cardGrant("s_g")
	got, err := st.PutGrant(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	_, grants, err := st.GetSession(ctx, "s_g")
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants: %d, %v", len(grants), err)
	}
	r := grants[0]
	if r.Token != g.Token || r.StandIn != g.StandIn || r.ItemID != g.ItemID || r.Kind != g.Kind || r.Label != g.Label ||
		r.Field != g.Field || r.Live || len(r.Origins) != 2 || r.Origins[1] != g.Origins[1] || !r.Expires.Equal(g.Expires) ||
		!r.OnePurchase || r.Purchase != 0 || r.Spent || r.Total == nil || *r.Total != *g.Total || got.StandIn != g.StandIn {
		t.Fatalf("grant round trip: %+v", r)
	}
	// Another replica writes the same token with its own stand-in: the
	// first one stays (it is what the browser typed).
	g2 := g
	g2.StandIn, g2.Expires, g2.Total = standIn("1"), t0.Add(10*time.Minute), nil
	got, err = st.PutGrant(ctx, g2)
	if err != nil || got.StandIn != g.StandIn || !got.Expires.Equal(g2.Expires) || got.Total != nil {
		t.Fatalf("renewal: %+v, %v", got, err)
	}
	// Spent, then renewed for the same purchase: still spent.
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_g", Token: g.Token, Claim: "c1", Now: t0, Until: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := st.SettleGrant(ctx, broker.SettleArgs{Session: "s_g", Token: g.Token, Claim: "c1", Spent: true}); err != nil {
		t.Fatal(err)
	}
	if got, err = st.PutGrant(ctx, g2); err != nil || !got.Spent {
		t.Fatalf("a renewal of the spent purchase un-spent it: %+v, %v", got, err)
	}
	// A new purchase starts fresh.
	g3 := g2
	g3.Purchase = 1
	if got, err = st.PutGrant(ctx, g3); err != nil || got.Spent || got.Purchase != 1 {
		t.Fatalf("new purchase: %+v, %v", got, err)
	}
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_g", Token: g.Token, Claim: "c2", Purchase: 1, Now: t0, Until: t0.Add(time.Minute)}); err != nil {
		t.Fatalf("claim of the new purchase: %v", err)
	}
	// A stale replica (purchase 0) never rolls it back.
	if got, err = st.PutGrant(ctx, g2); err != nil || got.Purchase != 1 {
		t.Fatalf("stale write: %+v, %v", got, err)
	}
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_g", Token: g.Token, Claim: "c3", Purchase: 0, Now: t0, Until: t0.Add(time.Minute)}); code(err) != agentvault.CodeGrantUsed {
		t.Fatalf("claim of an old purchase: %v, want grant_used", err)
	}
	// A login grant with a site keeps it.
	lg := broker.GrantRecord{Session: "s_g", Token: "av_login_gh_password_u7x2k", StandIn: "xyzXYZ12", ItemID: "itm_2",
		Kind: vault.KindLogin, Label: "gh", Field: vault.FieldPassword, Origins: []hostname.Origin{{Host: "www.gh.example", Port: 443}},
		Site: "gh.example", SitePort: 443, Expires: t0.Add(time.Minute)}
	if _, err := st.PutGrant(ctx, lg); err != nil {
		t.Fatal(err)
	}
	_, grants, _ = st.GetSession(ctx, "s_g")
	if len(grants) != 2 {
		t.Fatalf("%d grants, want 2", len(grants))
	}
	for _, r := range grants {
		if r.Token == lg.Token && (r.Site != "gh.example" || r.SitePort != 443 || r.OnePurchase || r.Total != nil) {
			t.Fatalf("login grant: %+v", r)
		}
	}
}

func claimRule(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	newSession(t, st, "s_c")
	g := cardGrant("s_c")
	if _, err := st.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	claim := func(id string, now time.Time) error {
		return st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_c", Token: g.Token, Claim: id, Now: now, Until: now.Add(time.Minute)})
	}
	settle := func(id string, spent bool) {
		t.Helper()
		if err := st.SettleGrant(ctx, broker.SettleArgs{Session: "s_c", Token: g.Token, Claim: id, Spent: spent}); err != nil {
			t.Fatal(err)
		}
	}
	if err := claim("c1", t0); err != nil {
		t.Fatal(err)
	}
	if err := claim("c2", t0.Add(time.Second)); code(err) != agentvault.CodeGrantInUse {
		t.Fatalf("second claim while held: %v, want grant_in_use", err)
	}
	settle("c2", true) // not the current claim: nothing changes
	settle("c1", false)
	if err := claim("c3", t0.Add(2*time.Second)); err != nil {
		t.Fatalf("claim after a refused request: %v", err)
	}
	settle("c3", true)
	if err := claim("c4", t0.Add(3*time.Second)); code(err) != agentvault.CodeGrantUsed {
		t.Fatalf("claim of a spent grant: %v, want grant_used", err)
	}
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_c", Token: "av_card_9_number_u7x2k", Claim: "c5", Now: t0, Until: t0.Add(time.Minute)}); code(err) != agentvault.CodeSessionEnded {
		t.Fatalf("claim of no grant: %v", err)
	}
	// A WebSocket message spends it at once.
	g.Purchase = 1
	if _, err := st.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	ws := broker.ClaimArgs{Session: "s_c", Token: g.Token, Claim: "c6", Purchase: 1, Now: t0, Until: t0.Add(time.Minute), Spend: true}
	if err := st.ClaimGrant(ctx, ws); err != nil {
		t.Fatal(err)
	}
	ws.Claim = "c7"
	if err := st.ClaimGrant(ctx, ws); code(err) != agentvault.CodeGrantUsed {
		t.Fatalf("second WebSocket use: %v", err)
	}
}

func claimLease(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	newSession(t, st, "s_l")
	g := cardGrant("s_l")
	if _, err := st.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_l", Token: g.Token, Claim: "dead", Now: t0, Until: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// The replica holding "dead" never settles. After its lease the
	// request may have reached the site: used, never free again.
	later := t0.Add(2 * time.Minute)
	for i := range 2 {
		err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_l", Token: g.Token, Claim: fmt.Sprint("c", i), Now: later, Until: later.Add(time.Minute)})
		if code(err) != agentvault.CodeGrantUsed {
			t.Fatalf("claim after the lease ran out: %v, want grant_used", err)
		}
	}
	_, grants, err := st.GetSession(ctx, "s_l")
	if err != nil || len(grants) != 1 || !grants[0].Spent {
		t.Fatalf("the grant is not marked spent: %+v, %v", grants, err)
	}
	// The late settle of an unknown outcome changes nothing.
	if err := st.SettleGrant(ctx, broker.SettleArgs{Session: "s_l", Token: g.Token, Claim: "dead"}); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_l", Token: g.Token, Claim: "c9", Now: later, Until: later.Add(time.Minute)}); code(err) != agentvault.CodeGrantUsed {
		t.Fatalf("claim after a late settle: %v", err)
	}
}

func concurrentClaims(t *testing.T, st broker.SessionStore) {
	ctx := context.Background()
	newSession(t, st, "s_r")
	g := cardGrant("s_r")
	if _, err := st.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, inUse := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_r", Token: g.Token, Claim: fmt.Sprint("c", i), Now: t0, Until: t0.Add(time.Minute)})
			mu.Lock()
			defer mu.Unlock()
			switch code(err) {
			case "":
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				won++
			case agentvault.CodeGrantInUse:
				inUse++
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || inUse != n-1 {
		t.Fatalf("%d claims won and %d refused in use, want 1 and %d", won, inUse, n-1)
	}
}

// standIn builds a card-shaped stand-in at run time (BIN and last four of
// the public test card around six of digit), so no card number is written in this
// file.
func standIn(digit string) string {
	return strings.Repeat("42", 3) + strings.Repeat(digit, 6) + strings.Repeat("42", 2)
}
