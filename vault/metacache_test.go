package vault_test

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault/vault"
)

// The opened-metadata cache answers only for the bytes it opened: an edit,
// metadata moved in from another item, and a caller changing what it was
// given are all seen on the next read.
func TestMetaCacheFollowsTheStoredBytes(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	a, err := e.v.AddCard(ctx, "org1", "w", card("4242424242424242", "123"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.v.AddCard(ctx, "org1", "w", card("5555555555554444", "321"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.v.Get(ctx, "org1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.Card.Sites[0] = "evil.example"
	got.Card.HolderName = "Mallory"
	again, err := e.v.Get(ctx, "org1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Card.Sites[0] != "shop.example.com" || again.Card.HolderName != "Ada Lovelace" {
		t.Fatalf("a caller's change reached the cache: %+v", again.Card)
	}

	holder := "Grace Hopper"
	if _, err := e.v.UpdateCard(ctx, "org1", a.ID, vault.CardUpdate{Holder: &holder, Actor: "owner:w"}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.v.GetByLabel(ctx, "org1", vault.KindCard, a.Label); err != nil || got.Card.HolderName != holder {
		t.Fatalf("after an update: %+v, %v", got.Card, err)
	}

	// b's metadata, read once (cached), then replaced by a's sealed bytes:
	// they are bound to a's id and must not open as b's.
	if _, err := e.v.Get(ctx, "org1", b.ID); err != nil {
		t.Fatal(err)
	}
	recA, err := e.store.GetItem(ctx, "org1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	recB, err := e.store.GetItem(ctx, "org1", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	recB.Meta = recA.Meta
	if err := e.store.PutItem(ctx, recB); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.Get(ctx, "org1", b.ID); err == nil {
		t.Fatal("metadata moved from another item opened")
	}
}
