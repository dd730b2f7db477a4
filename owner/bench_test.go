package owner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

func benchService(b *testing.B) *owner.Service {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	s, err := owner.New(owner.Config{Store: st, Org: "o", Password: fastPW, Engine: policy.NewEngine(policy.Rates{}, lastTwoLabels)})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAuthenticate is one API key check (SQLite read + SHA-256).
func BenchmarkAuthenticate(b *testing.B) {
	s := benchService(b)
	_, key, _ := s.CreateAPIKey(context.Background(), "agent", owner.Scope{AllCards: true})
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Authenticate(context.Background(), key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthorizeCardNumber is the full authorize hook for an allowed
// card-number fill with caps: key, rules, destinations, spending, grants,
// engine, and one ledger reservation per call.
func BenchmarkAuthorizeCardNumber(b *testing.B) {
	ctx := context.Background()
	s := benchService(b)
	k, _, _ := s.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true})
	s.AuthorizeSite(ctx, "shop.example", "owner")
	s.SetCardPolicy(ctx, owner.CardPolicy{CardID: "itm_c", Rules: policy.CardPolicy{DailyCap: ptr(policy.MustAmount("1000000000.00 EUR"))}}, "owner")
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber}, Card: &vault.CardMeta{AnySite: true}}
	total := policy.MustAmount("1.00 EUR")
	i := 0
	for b.Loop() {
		i++
		err := s.Authorize(ctx, policy.Fill{KeyID: k.ID, Session: fmt.Sprint("s_", i), Item: card, Field: vault.FieldNumber, Destination: "pay.shop.example", Total: &total})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkP18_ReserveContended races reservations on one card from
// parallel goroutines (IMMEDIATE transactions serialise them).
func BenchmarkP18_ReserveContended(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	caps := policy.Caps{Daily: ptr(policy.MustAmount("1000000000.00 EUR"))}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := st.Reserve(context.Background(), policy.Reservation{ID: fmt.Sprint(n.Add(1)), CardID: "c", Amount: policy.MustAmount("1.00 EUR"), Day: "d", Month: "m", Caps: caps})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPasswordDefault is one sign-in's argon2id at the default cost.
func BenchmarkPasswordDefault(b *testing.B) {
	h, _ := owner.HashPassword("correct horse battery staple", owner.DefaultPasswordParams)
	for b.Loop() {
		if !owner.CheckPassword("correct horse battery staple", h) {
			b.Fatal("mismatch")
		}
	}
}
