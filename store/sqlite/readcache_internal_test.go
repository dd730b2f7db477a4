package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

var rc0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openCached opens a fresh file with one active master key, and a second,
// separate database/sql handle on the same file: another writer, as the
// owner CLI in another process is (it shares nothing with the Store but
// the file and its schema).
func openCached(t testing.TB) (*Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vault.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddKey(context.Background(), vault.KeyRecord{ID: "k1", State: vault.KeyActive, Check: []byte("c"), Created: rc0}); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return s, other
}

func exec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("%s changed no row", q)
	}
}

func testItem(id, label string) vault.ItemRecord {
	return vault.ItemRecord{ID: id, Org: "o", Owner: "owner", Kind: vault.KindCard, Label: label, Created: rc0, Updated: rc0,
		Fields: []vault.Field{vault.FieldNumber, vault.FieldCVV}, KeyID: "k1", WrappedKey: []byte("wrapped"), Meta: []byte("meta"),
		Values: map[vault.Field][]byte{vault.FieldNumber: []byte("ct-number"), vault.FieldCVV: []byte("ct-cvv")}}
}

func testKey(id string) owner.APIKey {
	return owner.APIKey{ID: id, Org: "o", Name: "agent", SecretHash: []byte("hash"), Created: rc0,
		Scope: owner.Scope{CardIDs: []string{"itm_1", "itm_2"}, LoginIDs: []string{"itm_9"}}}
}

func testPolicy() owner.CardPolicy {
	return owner.CardPolicy{Org: "o", CardID: "itm_1", Currency: "EUR", Updated: rc0, UpdatedBy: "owner",
		Rules: policy.CardPolicy{BlockedMerchants: []string{"bad.example"}, PerPurchaseCap: &policy.Amount{Minor: 5000, Currency: "EUR"},
			DailyCap: &policy.Amount{Minor: 9000, Currency: "EUR"}}}
}

func testApproval(id string) owner.Approval {
	return owner.Approval{ID: id, Org: "o", Kind: owner.KindPurchase, Reason: "over_threshold", Site: "shop.example",
		Amount: &policy.Amount{Minor: 1200, Currency: "EUR"}, CardID: "itm_1", APIKeyID: "avk_1", Session: "s_1",
		Created: rc0, Expires: rc0.Add(time.Hour)}
}

// p21 reads twice (the second read must come from the cache), lets the
// other writer change the row, and reads again: the change must be seen.
func p21[T any](t *testing.T, s *Store, read func() (T, error), change func(), check func(before, after T, err error)) {
	t.Helper()
	before, err := read()
	if err != nil {
		t.Fatalf("first read: %v", err)
	}
	hits := s.readCacheStats().Hits
	again, err := read()
	if err != nil || !reflect.DeepEqual(again, before) {
		t.Fatalf("second read differs: %+v, %v", again, err)
	}
	if s.readCacheStats().Hits != hits+1 {
		t.Fatalf("second read was not served by the cache (hits %d -> %d)", hits, s.readCacheStats().Hits)
	}
	change()
	after, err := read()
	check(before, after, err)
}

func TestP21_RevokedKeySeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if err := s.CreateAPIKey(ctx, testKey("avk_1")); err != nil {
		t.Fatal(err)
	}
	p21(t, s, func() (owner.APIKey, error) { return s.GetAPIKey(ctx, "avk_1") },
		func() {
			exec(t, other, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, nanos(rc0.Add(time.Minute)), "avk_1")
		},
		func(before, after owner.APIKey, err error) {
			if err != nil || before.Revoked() || !after.Revoked() {
				t.Fatalf("revoke by another writer not seen: before %v after %v (%v)", before.Revoked(), after.Revoked(), err)
			}
		})
	// The scope narrowed by another writer, too.
	p21(t, s, func() (owner.APIKey, error) { return s.GetAPIKey(ctx, "avk_1") },
		func() { exec(t, other, `UPDATE api_keys SET card_ids = '["itm_2"]' WHERE id = ?`, "avk_1") },
		func(_, after owner.APIKey, err error) {
			if err != nil || !reflect.DeepEqual(after.Scope.CardIDs, []string{"itm_2"}) {
				t.Fatalf("scope change not seen: %v (%v)", after.Scope.CardIDs, err)
			}
		})
}

func TestP21_PausedCardSeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if err := s.PutCardPolicy(ctx, testPolicy()); err != nil {
		t.Fatal(err)
	}
	p21(t, s, func() (owner.CardPolicy, error) { return s.GetCardPolicy(ctx, "o", "itm_1") },
		func() {
			exec(t, other, `UPDATE card_policies SET paused = 1 WHERE org = ? AND card_id = ?`, "o", "itm_1")
		},
		func(before, after owner.CardPolicy, err error) {
			if err != nil || before.Rules.Paused || !after.Rules.Paused {
				t.Fatalf("pause by another writer not seen: before %v after %v (%v)", before.Rules.Paused, after.Rules.Paused, err)
			}
		})
	p21(t, s, func() (owner.CardPolicy, error) { return s.GetCardPolicy(ctx, "o", "itm_1") },
		func() { exec(t, other, `DELETE FROM card_policies WHERE org = ? AND card_id = ?`, "o", "itm_1") },
		func(_, _ owner.CardPolicy, err error) {
			if !errors.Is(err, vault.ErrNotFound) {
				t.Fatalf("policy removed by another writer still read: %v", err)
			}
		})
}

func TestP21_RemovedDestinationSeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	for _, h := range []string{"a.example", "shop.example"} {
		if err := s.AddDestination(ctx, owner.Destination{Org: "o", Host: h, AddedBy: "owner", Added: rc0}); err != nil {
			t.Fatal(err)
		}
	}
	p21(t, s, func() ([]owner.Destination, error) { return s.ListDestinations(ctx, "o") },
		func() { exec(t, other, `DELETE FROM destinations WHERE org = ? AND host = ?`, "o", "shop.example") },
		func(before, after []owner.Destination, err error) {
			if err != nil || len(before) != 2 || len(after) != 1 || after[0].Host != "a.example" {
				t.Fatalf("removal by another writer not seen: before %d after %+v (%v)", len(before), after, err)
			}
		})
}

func TestP21_DecidedApprovalSeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if _, _, err := s.CreateApproval(ctx, testApproval("apr_1"), "d1", rc0); err != nil {
		t.Fatal(err)
	}
	approved := owner.ApprovalFilter{Org: "o", Status: owner.StatusApproved, APIKeyID: "avk_1", Session: "s_1"}
	// An empty answer is cached too, and must not outlive the decision.
	p21(t, s, func() ([]owner.Approval, error) { return s.ListApprovals(ctx, approved) },
		func() {
			exec(t, other, `UPDATE approvals SET status = 'approved', decided_by = 'owner', decided_at = ? WHERE id = ?`, nanos(rc0), "apr_1")
		},
		func(before, after []owner.Approval, err error) {
			if err != nil || len(before) != 0 || len(after) != 1 || after[0].Status != owner.StatusApproved {
				t.Fatalf("decision by another writer not seen: before %+v after %+v (%v)", before, after, err)
			}
		})
	// And the owner's later denial of a new one, read pending first.
	if _, _, err := s.CreateApproval(ctx, testApproval("apr_2"), "d2", rc0); err != nil {
		t.Fatal(err)
	}
	pending := owner.ApprovalFilter{Org: "o", Status: owner.StatusPending}
	p21(t, s, func() ([]owner.Approval, error) { return s.ListApprovals(ctx, pending) },
		func() { exec(t, other, `UPDATE approvals SET status = 'denied' WHERE id = ?`, "apr_2") },
		func(before, after []owner.Approval, err error) {
			if err != nil || len(before) != 1 || len(after) != 0 {
				t.Fatalf("denial by another writer not seen: before %+v after %+v (%v)", before, after, err)
			}
		})
}

func TestP21_RemovedItemSeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if err := s.PutItem(ctx, testItem("itm_1", "1")); err != nil {
		t.Fatal(err)
	}
	gone := func(_, _ vault.ItemRecord, err error) {
		if !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("item removed by another writer still read: %v", err)
		}
	}
	byLabel := func() (vault.ItemRecord, error) { return s.GetItemByLabel(ctx, "o", vault.KindCard, "1") }
	if _, err := byLabel(); err != nil { // fill the label entry too
		t.Fatal(err)
	}
	p21(t, s, func() (vault.ItemRecord, error) { return s.GetItem(ctx, "o", "itm_1") },
		func() { exec(t, other, `DELETE FROM items WHERE org = ? AND id = ?`, "o", "itm_1") }, gone)
	if _, err := byLabel(); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("item removed by another writer still read by label: %v", err)
	}
}

func TestP21_EditedItemValueSeenAtOnce(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if err := s.PutItem(ctx, testItem("itm_1", "1")); err != nil {
		t.Fatal(err)
	}
	p21(t, s, func() (vault.ItemRecord, error) { return s.GetItemByLabel(ctx, "o", vault.KindCard, "1") },
		func() {
			exec(t, other, `UPDATE item_values SET value = ? WHERE item_id = ? AND field = ?`, []byte("ct-new"), "itm_1", string(vault.FieldNumber))
		},
		func(_, after vault.ItemRecord, err error) {
			if err != nil || string(after.Values[vault.FieldNumber]) != "ct-new" {
				t.Fatalf("value edited by another writer not seen: %q (%v)", after.Values[vault.FieldNumber], err)
			}
		})
	// A value row removed alone (the item row untouched).
	p21(t, s, func() (vault.ItemRecord, error) { return s.GetItem(ctx, "o", "itm_1") },
		func() {
			exec(t, other, `DELETE FROM item_values WHERE item_id = ? AND field = ?`, "itm_1", string(vault.FieldCVV))
		},
		func(_, after vault.ItemRecord, err error) {
			if _, ok := after.Values[vault.FieldCVV]; err != nil || ok {
				t.Fatalf("value removed by another writer still read (%v)", err)
			}
		})
	// The item row edited alone (its label).
	p21(t, s, func() (vault.ItemRecord, error) { return s.GetItem(ctx, "o", "itm_1") },
		func() { exec(t, other, `UPDATE items SET label = '7' WHERE id = ?`, "itm_1") },
		func(_, after vault.ItemRecord, err error) {
			if err != nil || after.Label != "7" {
				t.Fatalf("relabel by another writer not seen: %q (%v)", after.Label, err)
			}
		})
}

// fillAll reads every cached method once and returns the results.
func fillAll(t *testing.T, s *Store) []any {
	t.Helper()
	ctx := context.Background()
	var out []any
	add := func(v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	add(s.GetAPIKey(ctx, "avk_1"))
	add(s.GetCardPolicy(ctx, "o", "itm_1"))
	add(s.ListDestinations(ctx, "o"))
	add(s.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Status: owner.StatusApproved, APIKeyID: "avk_1", Session: "s_1"}))
	add(s.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Status: owner.StatusPending}))
	add(s.GetItem(ctx, "o", "itm_1"))
	add(s.GetItemByLabel(ctx, "o", vault.KindCard, "1"))
	return out
}

func snapshot(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func seedAll(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateAPIKey(ctx, testKey("avk_1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCardPolicy(ctx, testPolicy()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDestination(ctx, owner.Destination{Org: "o", Host: "shop.example", AddedBy: "owner", Added: rc0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateApproval(ctx, testApproval("apr_1"), "d1", rc0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval(ctx, "apr_1", owner.StatusApproved, "owner", rc0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateApproval(ctx, testApproval("apr_2"), "d2", rc0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutItem(ctx, testItem("itm_1", "1")); err != nil {
		t.Fatal(err)
	}
}

func version(t *testing.T, s *Store) int64 {
	t.Helper()
	v, err := s.storeVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestP21_PurchaseWritesKeepTheCache: every write a purchase makes (the
// session, its grants and their claim, the ledger reservation, the audit
// record of each release, a refusal, the approval sweep with nothing
// due) leaves the version where it was, so the cache keeps its entries
// and the reads after them are all hits. A cache emptied by every
// purchase would be useless.
func TestP21_PurchaseWritesKeepTheCache(t *testing.T) {
	s, _ := openCached(t)
	ctx := context.Background()
	seedAll(t, s)
	want := fillAll(t, s)
	v0 := version(t, s)
	st0 := s.readCacheStats()

	sess := broker.SessionRecord{ID: "s_1", Key: broker.APIKey{ID: "avk_1", Org: "o", Suffix: "u7x2k"},
		PwdHash: sha256.Sum256([]byte("pw")), Created: rc0, LastUsed: rc0}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchSession(ctx, "s_1", rc0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CountOpenSessions(ctx, "avk_1", rc0, rc0); err != nil {
		t.Fatal(err)
	}
	g := broker.GrantRecord{Session: "s_1", Token: "av_card_1_number_u7x2k", StandIn: strings.Repeat("4242", 4), ItemID: "itm_1",
		Kind: vault.KindCard, Label: "1", Field: vault.FieldNumber, Origins: []hostname.Origin{{Host: "shop.example", Port: 443}},
		Expires: rc0.Add(5 * time.Minute), Total: &policy.Amount{Minor: 1200, Currency: "EUR"}, OnePurchase: true}
	if _, err := s.PutGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	cvv := g
	cvv.Token, cvv.Field = "av_card_1_cvv_u7x2k", vault.FieldCVV
	if err := s.PutGrants(ctx, []broker.GrantRecord{cvv}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimGrant(ctx, broker.ClaimArgs{Session: "s_1", Token: g.Token, Claim: "c1", Now: rc0, Until: rc0.Add(time.Minute), Spend: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleGrant(ctx, broker.SettleArgs{Session: "s_1", Token: g.Token, Claim: "c1", Spent: true}); err != nil {
		t.Fatal(err)
	}
	caps := policy.Caps{}
	if err := s.Reserve(ctx, policy.Reservation{ID: "auth_1", CardID: "itm_1", Amount: policy.Amount{Minor: 1200, Currency: "EUR"},
		Day: "2026-03-01", Month: "2026-03", Caps: caps}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Spent(ctx, "itm_1", "2026-03-01", "2026-03", "EUR"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []vault.Field{vault.FieldNumber, vault.FieldCVV} {
		if _, err := s.AppendAudit(ctx, vault.AuditRecord{Time: rc0, Action: "release", Org: "o", ItemID: "itm_1", Kind: vault.KindCard,
			Field: f, Destination: "shop.example", Session: "s_1", Actor: "avk_1", Purpose: "substitution", ValueHMAC: []byte("mac")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendRefusal(ctx, owner.Refusal{Org: "o", Time: rc0, APIKeyID: "avk_1", Session: "s_1", ItemID: "itm_1",
		Kind: "card", Field: "number", Site: "other.example", Code: "destination_not_allowed"}); err != nil {
		t.Fatal(err)
	}
	if exp, err := s.ExpireApprovals(ctx, rc0.Add(time.Minute)); err != nil || len(exp) != 0 {
		t.Fatalf("sweep: %v %v", exp, err)
	}
	if err := s.Cancel(ctx, "auth_unknown"); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, "s_1", "closed", rc0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}

	if v := version(t, s); v != v0 {
		t.Fatalf("purchase-path writes moved the store version %d -> %d", v0, v)
	}
	got := fillAll(t, s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reads changed across purchase writes")
	}
	st := s.readCacheStats()
	if st.Flushes != st0.Flushes || st.Misses != st0.Misses || st.Hits != st0.Hits+int64(len(want)) {
		t.Fatalf("cache lost entries across purchase writes: before %+v after %+v", st0, st)
	}

	// The control: an owner write does move it.
	if err := s.RevokeAPIKey(ctx, "avk_1", rc0); err != nil {
		t.Fatal(err)
	}
	if v := version(t, s); v == v0 {
		t.Fatal("revoking a key did not move the store version")
	}
}

// TestP21_CallerMutationDoesNotReachTheCache: callers own what they get
// (vault code edits ItemRecord.Values in place before a PutItem): changing
// every slice, map and pointer of a returned value must not change what
// the next call returns.
func TestP21_CallerMutationDoesNotReachTheCache(t *testing.T) {
	s, _ := openCached(t)
	ctx := context.Background()
	seedAll(t, s)
	want := snapshot(t, fillAll(t, s)) // an encoding: shares nothing with the cache
	fillAll(t, s)                      // now all from the cache
	for range 2 {                      // the copy given on a miss and the one given on a hit
		k, _ := s.GetAPIKey(ctx, "avk_1")
		k.SecretHash[0] = 'X'
		k.Scope.CardIDs[0] = "itm_evil"
		k.Scope.LoginIDs = append(k.Scope.LoginIDs[:1], "itm_more")
		p, _ := s.GetCardPolicy(ctx, "o", "itm_1")
		p.Rules.BlockedMerchants[0] = "x"
		p.Rules.PerPurchaseCap.Minor = 1 << 40
		p.Rules.DailyCap.Currency = "XXX"
		ds, _ := s.ListDestinations(ctx, "o")
		ds[0].Host = "evil.example"
		as, _ := s.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Status: owner.StatusApproved, APIKeyID: "avk_1", Session: "s_1"})
		as[0].Status = owner.StatusDenied
		as[0].Amount.Minor = 1 << 40
		for _, it := range []func() (vault.ItemRecord, error){
			func() (vault.ItemRecord, error) { return s.GetItem(ctx, "o", "itm_1") },
			func() (vault.ItemRecord, error) { return s.GetItemByLabel(ctx, "o", vault.KindCard, "1") },
		} {
			r, _ := it()
			r.Values[vault.FieldNumber][0] = 'X'
			r.Values[vault.FieldTOTP] = []byte("added")
			delete(r.Values, vault.FieldCVV)
			r.Fields[0] = vault.FieldTOTP
			r.WrappedKey[0] = 'X'
			r.Meta[0] = 'X'
		}
	}
	if got := snapshot(t, fillAll(t, s)); got != want {
		t.Fatalf("a caller's change reached the cache:\n got %s\nwant %s", got, want)
	}
}

// TestP21_NotFoundCachedUntilTheRowComes: a missing row is read from the
// file once per version (a card without spending rules is asked for on
// every purchase), and the row another writer then adds is seen at once.
func TestP21_NotFoundCachedUntilTheRowComes(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	for range 3 {
		if _, err := s.GetAPIKey(ctx, "avk_1"); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("missing key: %v", err)
		}
	}
	if st := s.readCacheStats(); st.Hits != 2 || st.Misses != 1 {
		t.Fatalf("a not-found answer was read from the file again: %+v", st)
	}
	for range 2 {
		if _, err := s.GetCardPolicy(ctx, "o", "itm_1"); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("missing card policy: %v", err)
		}
	}
	p := testPolicy()
	exec(t, other, `INSERT INTO card_policies (`+cardPolicyCols+`) VALUES (?, ?, ?, 1, '[]', NULL, NULL, NULL, NULL, 0, 0, 0, ?, ?)`,
		p.Org, p.CardID, p.Currency, nanos(rc0), "owner")
	if got, err := s.GetCardPolicy(ctx, "o", "itm_1"); err != nil || !got.Rules.Paused {
		t.Fatalf("card policy added by another writer not seen: %+v, %v", got, err)
	}
	k := testKey("avk_1")
	exec(t, other, `INSERT INTO api_keys (`+apiKeyCols+`) VALUES (?, ?, ?, ?, 0, '[]', 0, '[]', 0, ?, NULL)`, k.ID, k.Org, k.Name, k.SecretHash, nanos(rc0))
	if _, err := s.GetAPIKey(ctx, "avk_1"); err != nil {
		t.Fatalf("key added by another writer not seen: %v", err)
	}
}

func TestReadCacheIsBounded(t *testing.T) {
	s, _ := openCached(t)
	ctx := context.Background()
	for i := range maxCacheEntries + 1 {
		if _, err := s.ListDestinations(ctx, fmt.Sprint("org", i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.readCacheStats(); st.Full != 1 {
		t.Fatalf("cache not emptied when full: %+v", st)
	}
	s.h.cache.mu.Lock()
	n := len(s.h.cache.m)
	s.h.cache.mu.Unlock()
	if n > maxCacheEntries {
		t.Fatalf("cache holds %d entries", n)
	}
}

// TestReadCacheKeyCoversTheFilter: ListApprovals is keyed by every field
// of owner.ApprovalFilter; a new field must join the key.
func TestReadCacheKeyCoversTheFilter(t *testing.T) {
	if n := reflect.TypeOf(owner.ApprovalFilter{}).NumField(); n != 5 {
		t.Fatalf("owner.ApprovalFilter has %d fields: add the new one to ListApprovals' cache key", n)
	}
}

// TestReadCacheTriggers: every versioned table has its three triggers.
func TestReadCacheTriggers(t *testing.T) {
	s, _ := openCached(t)
	for _, tbl := range versionedTables {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name LIKE 'store_version_%'`, tbl).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Fatalf("table %s has %d store_version triggers, want 3", tbl, n)
		}
	}
}

// TestP21_ConcurrentReadsSeeTheLastWrite: readers hammer the cache while
// another writer revokes and restores a key many times; once the writer
// is done every read sees its last state (run with -race).
func TestP21_ConcurrentReadsSeeTheLastWrite(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	seedAll(t, s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if k, err := s.GetAPIKey(ctx, "avk_1"); err != nil || k.ID != "avk_1" {
					t.Errorf("read: %v", err)
					return
				}
				if _, err := s.GetItem(ctx, "o", "itm_1"); err != nil {
					t.Errorf("read item: %v", err)
					return
				}
			}
		}()
	}
	for i := range 50 {
		if i%2 == 0 {
			exec(t, other, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, nanos(rc0), "avk_1")
		} else {
			exec(t, other, `UPDATE api_keys SET revoked_at = NULL WHERE id = ?`, "avk_1")
		}
	}
	exec(t, other, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, nanos(rc0), "avk_1")
	close(stop)
	wg.Wait()
	for range 3 {
		if k, err := s.GetAPIKey(ctx, "avk_1"); err != nil || !k.Revoked() {
			t.Fatalf("last revoke not seen: %v", err)
		}
	}
}

// BenchmarkGetAPIKey and BenchmarkGetItemByLabel compare a cached call
// (one version query, a map look-up and a copy) with the query itself.
func BenchmarkGetAPIKey(b *testing.B) {
	s, _ := openCached(b)
	ctx := context.Background()
	if err := s.CreateAPIKey(ctx, testKey("avk_1")); err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetAPIKey(ctx, "avk_1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.getAPIKey(ctx, "avk_1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.storeVersion(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkGetItemByLabel(b *testing.B) {
	s, _ := openCached(b)
	ctx := context.Background()
	it := testItem("itm_1", "1")
	for i := range 6 { // a login-sized item: a few values
		it.Values[vault.Field(fmt.Sprint("f", i))] = []byte(strings.Repeat("c", 64))
	}
	if err := s.PutItem(ctx, it); err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetItemByLabel(ctx, "o", vault.KindCard, "1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.getItem(ctx, qItemByLabel, "o", string(vault.KindCard), "1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestP21_ReadScopeOneVersionReadPerDecision: the reads of one decision
// (vault.ReadScope) check the cache's version once; a decision that begins
// after another writer's revoke sees it; a decision that began before it
// reads the file rather than pulling the cache back to its older version.
func TestP21_ReadScopeOneVersionReadPerDecision(t *testing.T) {
	s, other := openCached(t)
	ctx := context.Background()
	if err := s.CreateAPIKey(ctx, testKey("avk_1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCardPolicy(ctx, testPolicy()); err != nil {
		t.Fatal(err)
	}
	decide := func(ctx context.Context) owner.APIKey {
		t.Helper()
		k, err := s.GetAPIKey(ctx, "avk_1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetCardPolicy(ctx, "o", "itm_1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ListDestinations(ctx, "o"); err != nil {
			t.Fatal(err)
		}
		return k
	}
	decide(ctx) // fills the cache
	before := s.readCacheStats().VersionReads
	decide(vault.WithReadScope(ctx))
	if n := s.readCacheStats().VersionReads - before; n != 1 {
		t.Fatalf("one decision read the version %d times, want 1", n)
	}
	before = s.readCacheStats().VersionReads
	decide(ctx)
	if n := s.readCacheStats().VersionReads - before; n != 3 {
		t.Fatalf("three reads outside a scope read the version %d times, want 3", n)
	}

	// A decision that began before the revoke (its version read), then one
	// that begins after it.
	early := vault.WithReadScope(ctx)
	if k := decide(early); k.Revoked() {
		t.Fatal("revoked before the revoke")
	}
	exec(t, other, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, nanos(rc0.Add(time.Minute)), "avk_1")
	if k := decide(vault.WithReadScope(ctx)); !k.Revoked() {
		t.Fatal("a decision that began after another writer's revoke did not see it")
	}
	flushes := s.readCacheStats().Flushes
	decide(early) // reads under the older version: straight from the file
	if st := s.readCacheStats(); st.Flushes != flushes {
		t.Fatalf("an older decision's read emptied the cache (%d -> %d flushes)", flushes, st.Flushes)
	}
	if k := decide(ctx); !k.Revoked() {
		t.Fatal("the cache went back to before the revoke")
	}
}
