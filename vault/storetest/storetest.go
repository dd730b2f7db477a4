package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// Run runs the suite. open must return a fresh, empty store and arrange for
// it to be closed (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) vault.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s vault.Store)
	}{
		{"Keys", testKeys},
		{"ItemCRUD", testItemCRUD},
		{"ItemNotFound", testItemNotFound},
		{"ItemReplace", testItemReplace},
		{"LabelUnique", testLabelUnique},
		{"ItemRequiresActiveKey", testItemRequiresActiveKey},
		{"ItemAtomicUnderConcurrency", testItemAtomic},
		{"LabelSequence", testLabelSequence},
		{"LabelSequenceConcurrent", testLabelSequenceConcurrent},
		{"AuditOrderAndFilters", testAudit},
		{"AuditConcurrentAppend", testAuditConcurrent},
		{"TestP12_AuditCommittedWhenAppendReturns", testAuditCommittedOnReturn},
		{"Blobs", testBlobs},
		{"Rotate", testRotate},
		{"RotateFailureChangesNothing", testRotateFailure},
		{"TestP13_RotateRacingWriters", testRotateRacingWriters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open(t))
		})
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func code(err error) agentvault.Code { return agentvault.ErrorCode(err) }

func addKey(t *testing.T, s vault.Store, id string) {
	t.Helper()
	if err := s.AddKey(context.Background(), vault.KeyRecord{ID: id, State: vault.KeyActive, Check: []byte("check-" + id), Created: t0}); err != nil {
		t.Fatalf("AddKey(%s): %v", id, err)
	}
}

func item(id, org string, kind vault.Kind, label, keyID string, gen int) vault.ItemRecord {
	g := fmt.Sprintf("gen%06d", gen)
	return vault.ItemRecord{
		ID: id, Org: org, Owner: "owner", Kind: kind, Label: label,
		Created: t0.Add(time.Duration(gen) * time.Second), Updated: t0.Add(time.Duration(gen) * time.Second),
		Fields:     []vault.Field{vault.FieldNumber, vault.FieldCVV},
		KeyID:      keyID,
		WrappedKey: []byte("wrapped-" + g),
		Meta:       []byte("meta-" + g),
		Values: map[vault.Field][]byte{
			vault.FieldNumber: []byte("number-" + g),
			vault.FieldCVV:    []byte("cvv-" + g),
		},
	}
}

func equalItem(a, b vault.ItemRecord) bool {
	if a.ID != b.ID || a.Org != b.Org || a.Owner != b.Owner || a.Kind != b.Kind || a.Label != b.Label ||
		!a.Created.Equal(b.Created) || !a.Updated.Equal(b.Updated) || !slices.Equal(a.Fields, b.Fields) ||
		a.KeyID != b.KeyID || !bytes.Equal(a.WrappedKey, b.WrappedKey) || !bytes.Equal(a.Meta, b.Meta) ||
		len(a.Values) != len(b.Values) {
		return false
	}
	for f, v := range a.Values {
		if !bytes.Equal(v, b.Values[f]) {
			return false
		}
	}
	return true
}

func testKeys(t *testing.T, s vault.Store) {
	ctx := context.Background()
	ks, err := s.Keys(ctx)
	if err != nil || len(ks) != 0 {
		t.Fatalf("fresh store Keys = %d records, %v; want none", len(ks), err)
	}
	addKey(t, s, "k1")
	err = s.AddKey(ctx, vault.KeyRecord{ID: "k2", State: vault.KeyActive, Check: []byte("c"), Created: t0})
	if code(err) != agentvault.CodeConflict {
		t.Fatalf("second AddKey: code %q, want conflict", code(err))
	}
	ks, err = s.Keys(ctx)
	if err != nil || len(ks) != 1 {
		t.Fatalf("Keys = %d, %v; want 1", len(ks), err)
	}
	k := ks[0]
	if k.ID != "k1" || k.State != vault.KeyActive || string(k.Check) != "check-k1" || !k.Created.Equal(t0) {
		t.Fatalf("key record did not round-trip: id %q state %q created %v", k.ID, k.State, k.Created)
	}
}

func testItemCRUD(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	a := item("itm_a", "org1", vault.KindCard, "1", "k1", 1)
	b := item("itm_b", "org1", vault.KindLogin, "github", "k1", 2)
	c := item("itm_c", "org2", vault.KindCard, "1", "k1", 3)
	for _, r := range []vault.ItemRecord{b, a, c} {
		if err := s.PutItem(ctx, r); err != nil {
			t.Fatalf("PutItem(%s): %v", r.ID, err)
		}
	}
	got, err := s.GetItem(ctx, "org1", "itm_a")
	if err != nil || !equalItem(got, a) {
		t.Fatalf("GetItem did not round-trip (err %v)", err)
	}
	got, err = s.GetItemByLabel(ctx, "org1", vault.KindLogin, "github")
	if err != nil || !equalItem(got, b) {
		t.Fatalf("GetItemByLabel did not round-trip (err %v)", err)
	}
	list, err := s.ListItems(ctx, "org1")
	if err != nil || len(list) != 2 || !equalItem(list[0], a) || !equalItem(list[1], b) {
		t.Fatalf("ListItems(org1): %d items, err %v; want a then b (creation order)", len(list), err)
	}
	if list, _ := s.ListItems(ctx, "nobody"); len(list) != 0 {
		t.Fatalf("ListItems of an empty org returned %d", len(list))
	}
	if err := s.DeleteItem(ctx, "org1", "itm_a"); err != nil {
		t.Fatalf("DeleteItem: %v", err)
	}
	if _, err := s.GetItem(ctx, "org1", "itm_a"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("GetItem after delete: %v, want ErrNotFound", err)
	}
	// A deleted item's values are gone too: a new item with the same id and
	// fewer fields shows only its own.
	a2 := item("itm_a", "org1", vault.KindCard, "1", "k1", 4)
	delete(a2.Values, vault.FieldCVV)
	a2.Fields = []vault.Field{vault.FieldNumber}
	if err := s.PutItem(ctx, a2); err != nil {
		t.Fatalf("PutItem after delete: %v", err)
	}
	if got, _ := s.GetItem(ctx, "org1", "itm_a"); !equalItem(got, a2) {
		t.Fatalf("re-created item carries stale values: %d values", len(got.Values))
	}
}

func testItemNotFound(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "k1", 1)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
	}{
		{"missing id", func() error { _, err := s.GetItem(ctx, "org1", "itm_x"); return err }()},
		{"other org", func() error { _, err := s.GetItem(ctx, "org2", "itm_a"); return err }()},
		{"missing label", func() error { _, err := s.GetItemByLabel(ctx, "org1", vault.KindCard, "2"); return err }()},
		{"label other kind", func() error { _, err := s.GetItemByLabel(ctx, "org1", vault.KindLogin, "1"); return err }()},
		{"delete missing", s.DeleteItem(ctx, "org1", "itm_x")},
		{"delete other org", s.DeleteItem(ctx, "org2", "itm_a")},
		{"blob missing", func() error { _, err := s.GetBlob(ctx, "nope"); return err }()},
		{"delete blob missing", s.DeleteBlob(ctx, "nope")},
	}
	for _, c := range cases {
		if !errors.Is(c.err, vault.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", c.name, c.err)
		}
	}
	if _, err := s.GetItem(ctx, "org1", "itm_a"); err != nil {
		t.Fatalf("delete from another org removed the item: %v", err)
	}
}

func testItemReplace(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "k1", 1)); err != nil {
		t.Fatal(err)
	}
	r := item("itm_a", "org1", vault.KindCard, "1", "k1", 2)
	r.Values = map[vault.Field][]byte{vault.FieldHolder: []byte("holder-gen2")}
	r.Fields = []vault.Field{vault.FieldHolder}
	if err := s.PutItem(ctx, r); err != nil {
		t.Fatalf("replace: %v", err)
	}
	got, err := s.GetItem(ctx, "org1", "itm_a")
	if err != nil || !equalItem(got, r) {
		t.Fatalf("replace left old fields behind or lost new ones: %d values, %v", len(got.Values), err)
	}
	// The same id in another org is a conflict, not a silent move.
	moved := item("itm_a", "org2", vault.KindCard, "1", "k1", 3)
	if err := s.PutItem(ctx, moved); code(err) != agentvault.CodeConflict {
		t.Fatalf("put of an existing id into another org: code %q, want conflict", code(err))
	}
}

func testLabelUnique(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindLogin, "github", "k1", 1)); err != nil {
		t.Fatal(err)
	}
	err := s.PutItem(ctx, item("itm_b", "org1", vault.KindLogin, "github", "k1", 2))
	if code(err) != agentvault.CodeConflict {
		t.Fatalf("duplicate label: code %q, want conflict", code(err))
	}
	if _, err := s.GetItem(ctx, "org1", "itm_b"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("a refused put left a record behind: %v", err)
	}
	for _, r := range []vault.ItemRecord{
		item("itm_c", "org2", vault.KindLogin, "github", "k1", 3),
		item("itm_d", "org1", vault.KindCard, "github", "k1", 4),
	} {
		if err := s.PutItem(ctx, r); err != nil {
			t.Fatalf("same label in another org or kind must be allowed: %v", err)
		}
	}
}

func testItemRequiresActiveKey(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "nokey", 1)); err == nil {
		t.Fatal("PutItem under an unknown key id succeeded")
	}
	rot := vault.RotateArgs{NewKey: vault.KeyRecord{ID: "k2", State: vault.KeyActive, Check: []byte("c2"), Created: t0},
		Rewrap: func(w vault.WrappedKey) ([]byte, error) { return w.Wrapped, nil }}
	if err := s.Rotate(ctx, rot); err != nil {
		t.Fatal(err)
	}
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "k1", 1)); code(err) != agentvault.CodeConflict {
		t.Fatalf("PutItem under a retired key: code %q, want conflict", code(err))
	}
	if err := s.PutBlob(ctx, vault.BlobRecord{Name: "b", KeyID: "k1", WrappedKey: []byte("w"), Data: []byte("d"), Updated: t0}); code(err) != agentvault.CodeConflict {
		t.Fatalf("PutBlob under a retired key: code %q, want conflict", code(err))
	}
}

// testItemAtomic writes generations of one item while readers check that
// every read shows one generation throughout (row, wrapped key, all values).
func testItemAtomic(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "k1", 0)); err != nil {
		t.Fatal(err)
	}
	const gens = 60
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for g := 1; g <= gens; g++ {
			if err := s.PutItem(ctx, item("itm_a", "org1", vault.KindCard, "1", "k1", g)); err != nil {
				errs <- fmt.Errorf("writer: %w", err)
				return
			}
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := s.GetItem(ctx, "org1", "itm_a")
				if err != nil {
					errs <- fmt.Errorf("reader: %w", err)
					return
				}
				g := string(bytes.TrimPrefix(got.Meta, []byte("meta-")))
				if string(got.WrappedKey) != "wrapped-"+g || string(got.Values[vault.FieldNumber]) != "number-"+g ||
					string(got.Values[vault.FieldCVV]) != "cvv-"+g || len(got.Values) != 2 {
					errs <- fmt.Errorf("reader saw a mixed record (meta %s, %d values)", g, len(got.Values))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testLabelSequence(t *testing.T, s vault.Store) {
	ctx := context.Background()
	want := []struct {
		org  string
		kind vault.Kind
		n    int64
	}{
		{"org1", vault.KindCard, 1}, {"org1", vault.KindCard, 2}, {"org1", vault.KindIdentity, 1},
		{"org2", vault.KindCard, 1}, {"org1", vault.KindCard, 3}, {"org1", vault.KindAddress, 1},
	}
	for i, w := range want {
		n, err := s.NextLabel(ctx, w.org, w.kind)
		if err != nil || n != w.n {
			t.Fatalf("step %d NextLabel(%s,%s) = %d, %v; want %d", i, w.org, w.kind, n, err, w.n)
		}
	}
}

func testLabelSequenceConcurrent(t *testing.T, s vault.Store) {
	ctx := context.Background()
	const workers, each = 6, 15
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				n, err := s.NextLabel(ctx, "org1", vault.KindCard)
				if err != nil {
					t.Errorf("NextLabel: %v", err)
					return
				}
				mu.Lock()
				seen[n]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for n := int64(1); n <= workers*each; n++ {
		if seen[n] != 1 {
			t.Fatalf("label %d handed out %d times; want exactly once", n, seen[n])
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct labels, want %d", len(seen), workers*each)
	}
}

func testAudit(t *testing.T, s vault.Store) {
	ctx := context.Background()
	recs := []vault.AuditRecord{
		{Time: t0, Action: vault.AuditRelease, Org: "org1", ItemID: "itm_a", Kind: vault.KindCard, Field: vault.FieldNumber, Destination: "shop.example", Session: "s1", Actor: "key1", Purpose: "substitution", ValueHMAC: []byte{1, 2, 3}},
		{Time: t0.Add(time.Second), Action: vault.AuditRelease, Org: "org1", ItemID: "itm_b", Kind: vault.KindLogin, Field: vault.FieldPassword, Destination: "github.com", Session: "s2", Actor: "key1", Purpose: "substitution", ValueHMAC: []byte{4}},
		{Time: t0.Add(2 * time.Second), Action: vault.AuditAdd, Org: "org2", ItemID: "itm_c", Kind: vault.KindCard},
		// Appended later with an earlier time: order is append order.
		{Time: t0.Add(-time.Hour), Action: vault.AuditRelease, Org: "org1", ItemID: "itm_a", Kind: vault.KindCard, Field: vault.FieldCVV, Destination: "shop.example", Session: "s1", Actor: "key2", Purpose: "substitution", ValueHMAC: []byte{5}},
	}
	var last int64
	for i, r := range recs {
		seq, err := s.AppendAudit(ctx, r)
		if err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
		if seq <= last {
			t.Fatalf("AppendAudit %d: seq %d not after %d", i, seq, last)
		}
		last = seq
		recs[i].Seq = seq
	}
	all, err := s.QueryAudit(ctx, vault.AuditFilter{})
	if err != nil || len(all) != len(recs) {
		t.Fatalf("QueryAudit(all) = %d, %v", len(all), err)
	}
	for i := range recs {
		g, w := all[i], recs[i]
		if g.Seq != w.Seq || !g.Time.Equal(w.Time) || g.Action != w.Action || g.Org != w.Org || g.ItemID != w.ItemID ||
			g.Kind != w.Kind || g.Field != w.Field || g.Destination != w.Destination || g.Session != w.Session ||
			g.Actor != w.Actor || g.Purpose != w.Purpose || !bytes.Equal(g.ValueHMAC, w.ValueHMAC) {
			t.Fatalf("record %d did not round-trip in append order", i)
		}
	}
	seqs := func(f vault.AuditFilter) []int64 {
		t.Helper()
		rs, err := s.QueryAudit(ctx, f)
		if err != nil {
			t.Fatalf("QueryAudit: %v", err)
		}
		var out []int64
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	s0, s1, s2, s3 := recs[0].Seq, recs[1].Seq, recs[2].Seq, recs[3].Seq
	cases := []struct {
		name string
		f    vault.AuditFilter
		want []int64
	}{
		{"org", vault.AuditFilter{Org: "org1"}, []int64{s0, s1, s3}},
		{"item", vault.AuditFilter{ItemID: "itm_a"}, []int64{s0, s3}},
		{"session", vault.AuditFilter{Session: "s2"}, []int64{s1}},
		{"action", vault.AuditFilter{Action: vault.AuditAdd}, []int64{s2}},
		{"since", vault.AuditFilter{Since: t0.Add(time.Second)}, []int64{s1, s2}},
		{"until", vault.AuditFilter{Until: t0.Add(time.Second)}, []int64{s0, s3}},
		{"after seq", vault.AuditFilter{AfterSeq: s1}, []int64{s2, s3}},
		{"limit", vault.AuditFilter{Limit: 2}, []int64{s0, s1}},
		{"org and limit", vault.AuditFilter{Org: "org1", AfterSeq: s0, Limit: 1}, []int64{s1}},
		{"nothing", vault.AuditFilter{Org: "nobody"}, nil},
	}
	for _, c := range cases {
		if got := seqs(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: seqs %v, want %v", c.name, got, c.want)
		}
	}
}

func testAuditConcurrent(t *testing.T, s vault.Store) {
	ctx := context.Background()
	const workers, each = 4, 20
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.AppendAudit(ctx, vault.AuditRecord{Time: t0, Action: vault.AuditRelease, Org: "org1", Session: fmt.Sprint("w", w)}); err != nil {
					t.Errorf("AppendAudit: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rs, err := s.QueryAudit(ctx, vault.AuditFilter{Org: "org1"})
	if err != nil || len(rs) != workers*each {
		t.Fatalf("QueryAudit = %d, %v; want %d", len(rs), err, workers*each)
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].Seq <= rs[i-1].Seq {
			t.Fatalf("audit not in strictly increasing seq order at %d", i)
		}
	}
}

// testAuditCommittedOnReturn: many concurrent appends (a store may
// group-commit them); each caller, as soon as AppendAudit returns, finds
// its own record by its seq, so no append returns before the commit that
// holds it (P12: a release never leaves before its audit record).
func testAuditCommittedOnReturn(t *testing.T, s vault.Store) {
	ctx := context.Background()
	const workers, each = 64, 5
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				sess := fmt.Sprintf("w%d_%d", w, i)
				seq, err := s.AppendAudit(ctx, vault.AuditRecord{Time: t0, Action: vault.AuditRelease, Org: "org1", Session: sess, ValueHMAC: []byte{byte(i)}})
				if err != nil {
					t.Errorf("AppendAudit: %v", err)
					return
				}
				rs, err := s.QueryAudit(ctx, vault.AuditFilter{AfterSeq: seq - 1, Limit: 1})
				if err != nil || len(rs) != 1 || rs[0].Seq != seq || rs[0].Session != sess {
					t.Errorf("record %d not readable when AppendAudit returned (%d found, %v)", seq, len(rs), err)
					return
				}
				mu.Lock()
				if seen[seq] {
					t.Errorf("seq %d handed out twice", seq)
				}
				seen[seq] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("%d distinct seqs for %d appends", len(seen), workers*each)
	}
}

func testBlobs(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	b := vault.BlobRecord{Name: "ca-key", KeyID: "k1", WrappedKey: []byte("w1"), Data: []byte("d1"), Updated: t0}
	if err := s.PutBlob(ctx, b); err != nil {
		t.Fatalf("PutBlob: %v", err)
	}
	got, err := s.GetBlob(ctx, "ca-key")
	if err != nil || got.KeyID != "k1" || string(got.WrappedKey) != "w1" || string(got.Data) != "d1" || !got.Updated.Equal(t0) {
		t.Fatalf("GetBlob did not round-trip (err %v)", err)
	}
	b.Data, b.WrappedKey = []byte("d2"), []byte("w2")
	if err := s.PutBlob(ctx, b); err != nil {
		t.Fatalf("PutBlob replace: %v", err)
	}
	if got, _ := s.GetBlob(ctx, "ca-key"); string(got.Data) != "d2" || string(got.WrappedKey) != "w2" {
		t.Fatal("PutBlob did not replace")
	}
	once := vault.BlobRecord{Name: "ca-key", KeyID: "k1", WrappedKey: []byte("w3"), Data: []byte("d3"), Updated: t0, CreateOnly: true}
	if err := s.PutBlob(ctx, once); code(err) != agentvault.CodeConflict {
		t.Fatalf("CreateOnly over an existing blob: code %q, want conflict", code(err))
	}
	if got, _ := s.GetBlob(ctx, "ca-key"); string(got.Data) != "d2" {
		t.Fatal("a refused CreateOnly put changed the blob")
	}
	once.Name = "fresh"
	if err := s.PutBlob(ctx, once); err != nil {
		t.Fatalf("CreateOnly of a new name: %v", err)
	}
	if err := s.DeleteBlob(ctx, "ca-key"); err != nil {
		t.Fatalf("DeleteBlob: %v", err)
	}
	if _, err := s.GetBlob(ctx, "ca-key"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("GetBlob after delete: %v", err)
	}
}

func testRotate(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	for i, org := range []string{"org1", "org1", "org2"} {
		if err := s.PutItem(ctx, item(fmt.Sprint("itm_", i), org, vault.KindCard, fmt.Sprint(i+1), "k1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutBlob(ctx, vault.BlobRecord{Name: "ca-key", KeyID: "k1", WrappedKey: []byte("wb"), Data: []byte("db"), Updated: t0}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	err := s.Rotate(ctx, vault.RotateArgs{
		NewKey: vault.KeyRecord{ID: "k2", State: vault.KeyActive, Check: []byte("check-k2"), Created: t0.Add(time.Hour)},
		Rewrap: func(w vault.WrappedKey) ([]byte, error) {
			if w.KeyID != "k1" {
				return nil, fmt.Errorf("rewrap saw key id %q", w.KeyID)
			}
			seen = append(seen, w.Owner+":"+w.Org+":"+w.ID)
			return append([]byte("k2:"), w.Wrapped...), nil
		},
	})
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	slices.Sort(seen)
	want := []string{"blob::ca-key", "item:org1:itm_0", "item:org1:itm_1", "item:org2:itm_2"}
	if !slices.Equal(seen, want) {
		t.Fatalf("Rewrap saw %v, want %v", seen, want)
	}
	for i, org := range []string{"org1", "org1", "org2"} {
		got, err := s.GetItem(ctx, org, fmt.Sprint("itm_", i))
		if err != nil || got.KeyID != "k2" || string(got.WrappedKey) != fmt.Sprintf("k2:wrapped-gen%06d", i) {
			t.Fatalf("item %d after rotation: key %q, err %v", i, got.KeyID, err)
		}
		if string(got.Values[vault.FieldNumber]) != fmt.Sprintf("number-gen%06d", i) || string(got.Meta) != fmt.Sprintf("meta-gen%06d", i) {
			t.Fatalf("rotation touched item %d's values or metadata", i)
		}
	}
	if b, _ := s.GetBlob(ctx, "ca-key"); b.KeyID != "k2" || string(b.WrappedKey) != "k2:wb" || string(b.Data) != "db" {
		t.Fatal("blob not re-wrapped (or its data changed)")
	}
	ks, _ := s.Keys(ctx)
	states := map[string]vault.KeyState{}
	for _, k := range ks {
		states[k.ID] = k.State
	}
	if len(ks) != 2 || states["k1"] != vault.KeyRetired || states["k2"] != vault.KeyActive {
		t.Fatalf("key states after rotation: %v", states)
	}
	if err := s.PutItem(ctx, item("itm_new", "org1", vault.KindCard, "9", "k2", 9)); err != nil {
		t.Fatalf("PutItem under the new key: %v", err)
	}
}

func testRotateFailure(t *testing.T, s vault.Store) {
	ctx := context.Background()
	addKey(t, s, "k1")
	for i := 0; i < 3; i++ {
		if err := s.PutItem(ctx, item(fmt.Sprint("itm_", i), "org1", vault.KindCard, fmt.Sprint(i+1), "k1", i)); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	boom := errors.New("rewrap failed")
	err := s.Rotate(ctx, vault.RotateArgs{
		NewKey: vault.KeyRecord{ID: "k2", State: vault.KeyActive, Check: []byte("c"), Created: t0},
		Rewrap: func(w vault.WrappedKey) ([]byte, error) {
			calls++
			if calls == 2 {
				return nil, boom
			}
			return []byte("new"), nil
		},
	})
	if err == nil {
		t.Fatal("Rotate with a failing Rewrap succeeded")
	}
	for i := 0; i < 3; i++ {
		got, _ := s.GetItem(ctx, "org1", fmt.Sprint("itm_", i))
		if got.KeyID != "k1" || string(got.WrappedKey) != fmt.Sprintf("wrapped-gen%06d", i) {
			t.Fatalf("failed rotation changed item %d", i)
		}
	}
	ks, _ := s.Keys(ctx)
	if len(ks) != 1 || ks[0].ID != "k1" || ks[0].State != vault.KeyActive {
		t.Fatalf("failed rotation changed the key table (%d keys)", len(ks))
	}
}

// testRotateRacingWriters: writers keep putting items under the active
// key while another connection rotates it; afterwards every item is under the new key. (Without the
// keys table lock, an item written between the rotation's scan and its
// commit stays wrapped under a retired key and can no longer be opened.)
func testRotateRacingWriters(t *testing.T, s vault.Store) {
	ctx := context.Background()
	if err := s.AddKey(ctx, vault.KeyRecord{ID: "k1", State: vault.KeyActive, Check: []byte("c1")}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var puts atomic.Int64
	// Few writers, each with a bounded number of puts: SQLite's write lock
	// is not fair, and unbounded writers could starve the rotation past
	// its busy timeout.
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("itm_%d_%d", w, i)
				err := s.PutItem(ctx, vault.ItemRecord{ID: id, Org: "o", Owner: "w", Kind: vault.KindLogin, Label: id,
					KeyID: "k1", WrappedKey: []byte("w1"), Meta: []byte("m"), Fields: []vault.Field{vault.FieldPassword},
					Values: map[vault.Field][]byte{vault.FieldPassword: []byte("p")}})
				switch agentvault.ErrorCode(err) {
				case "":
					puts.Add(1)
				case agentvault.CodeConflict: // k1 retired: the writer would reopen with the new key
				default:
					t.Errorf("PutItem: %v", err)
					return
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
wait:
	for puts.Load() < 20 {
		select {
		case <-finished:
			break wait
		default:
			runtime.Gosched()
		}
	}
	err := s.Rotate(ctx, vault.RotateArgs{NewKey: vault.KeyRecord{ID: "k2", Check: []byte("c2")},
		Rewrap: func(w vault.WrappedKey) ([]byte, error) { return []byte("w2"), nil }})
	close(stop)
	<-finished
	if err != nil {
		t.Fatal(err)
	}
	items, err := s.ListItems(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.KeyID != "k2" || string(it.WrappedKey) != "w2" {
			t.Fatalf("item %s is wrapped under %s after the rotation (%d items)", it.ID, it.KeyID, len(items))
		}
	}
	t.Logf("%d items, all under the new key", len(items))
}
