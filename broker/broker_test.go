package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// fakeVault holds one card and records every release (audit first).
type fakeVault struct {
	mu       sync.Mutex
	card     vault.Item
	number   string
	releases []broker.ReleaseArgs
}

func (v *fakeVault) List(context.Context, string) ([]vault.Item, error) {
	return []vault.Item{v.card}, nil
}

func (v *fakeVault) GetByLabel(_ context.Context, org string, k vault.Kind, label string) (vault.Item, error) {
	if k == v.card.Kind && label == v.card.Label {
		return v.card, nil
	}
	return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "no such item")
}

func (v *fakeVault) Release(_ context.Context, a broker.ReleaseArgs) (vault.Secret, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.releases = append(v.releases, a)
	return vault.NewSecret([]byte(v.number)), nil
}

// allowFills is an Authorizer that allows every fill.
type allowFills struct{}

func (allowFills) Authorize(context.Context, policy.Fill) error { return nil }
func (allowFills) Recheck(context.Context, policy.Fill) error   { return nil }

// newBroker is a broker over one card on a clock, allowing every fill,
// with mods applied to its Config, and a session of it.
func newBroker(t *testing.T, mods ...func(*broker.Config)) (*broker.Broker, *broker.Session, *time.Time) {
	t.Helper()
	b, now := brokerOnly(t, mods...)
	s, _, err := b.Create(context.Background(), "avk")
	if err != nil {
		t.Fatal(err)
	}
	return b, s, now
}

// brokerOnly is newBroker without the session.
func brokerOnly(t *testing.T, mods ...func(*broker.Config)) (*broker.Broker, *time.Time) {
	t.Helper()
	v := &fakeVault{number: "4242424242424242", card: vault.Item{ID: "itm_1", Org: "org1", Kind: vault.KindCard, Label: "1",
		Fields: []vault.Field{vault.FieldNumber, vault.FieldCVV}, Card: &vault.CardMeta{Sites: []string{"shop.test"}}}}
	now := time.Now()
	cfg := broker.Config{Vault: v, Authorizer: allowFills{}, Now: func() time.Time { return now },
		LookupKey: func(context.Context, string) (broker.APIKey, error) {
			return broker.APIKey{ID: "key1", Org: "org1", Suffix: "t3st1", Scope: policy.KeyScope{AllCards: true, AllLogins: true}}, nil
		}}
	for _, mod := range mods {
		mod(&cfg)
	}
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, &now
}

func grantFor(t *testing.T, b *broker.Broker, s *broker.Session, page string) *broker.Grant {
	t.Helper()
	if _, err := b.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: "av_card_1_number_t3st1", PageURL: page}); err != nil {
		t.Fatal(err)
	}
	_, gs := s.Grants()
	if len(gs) != 1 {
		t.Fatalf("%d grants", len(gs))
	}
	return gs[0]
}

func origin(t *testing.T, hp string) hostname.Origin {
	o, err := hostname.Parse(hp, 443)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestP21_ReleaseFollowsTheGrant: the origin, the use rule and the expiry
// of a card grant, decided by Release itself.
func TestP21_ReleaseFollowsTheGrant(t *testing.T) {
	ctx := context.Background()
	b, s, now := newBroker(t)
	g := grantFor(t, b, s, "https://shop.test/checkout")
	for _, bad := range []string{"shop.test:8443", "evil.test", "pay.shop.test"} {
		if _, err := b.Release(ctx, s.NewUse(), g, origin(t, bad), nil); agentvault.ErrorCode(err) != agentvault.CodeDestinationUnauthorized {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	u := s.NewUse()
	if _, err := b.Release(ctx, u, g, origin(t, "shop.test"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, s.NewUse(), g, origin(t, "shop.test"), nil); agentvault.ErrorCode(err) != agentvault.CodeGrantInUse {
		t.Fatalf("concurrent use: %v", err)
	}
	u.Done(402) // declined: may be retried
	u = s.NewUse()
	if _, err := b.Release(ctx, u, g, origin(t, "shop.test"), nil); err != nil {
		t.Fatalf("retry after a decline: %v", err)
	}
	u.Done(200)
	if _, err := b.Release(ctx, s.NewUse(), g, origin(t, "shop.test"), nil); agentvault.ErrorCode(err) != agentvault.CodeGrantUsed {
		t.Fatalf("after the purchase: %v", err)
	}
	g = grantFor(t, b, s, "https://shop.test/checkout")
	*now = now.Add(6 * time.Minute)
	if _, err := b.Release(ctx, s.NewUse(), g, origin(t, "shop.test"), nil); agentvault.ErrorCode(err) != agentvault.CodeGrantExpired {
		t.Fatalf("expired grant: %v", err)
	}
}

// TestP10_ScrubSetOnlyForRecipients: a host is scrubbed of a value only once
// it was sent that value, and in every session.
func TestP10_ScrubSetOnlyForRecipients(t *testing.T) {
	ctx := context.Background()
	b, s, _ := newBroker(t)
	g := grantFor(t, b, s, "https://shop.test/checkout")
	if n := len(b.ScrubSet(ctx, s, "shop.test")); n != 0 {
		t.Fatalf("authorized but never sent: %d values to scrub", n)
	}
	if _, err := b.Release(ctx, s.NewUse(), g, origin(t, "shop.test"), nil); err != nil {
		t.Fatal(err)
	}
	other, _, _ := b.Create(ctx, "avk")
	for _, sess := range []*broker.Session{s, other} {
		vals := b.ScrubSet(ctx, sess, "shop.test")
		if len(vals) != 1 || string(vals[0].Real.InsecureRawBytes()) != "4242424242424242" || vals[0].StandIn == "" {
			t.Fatalf("recipient host: %d values", len(vals))
		}
		if n := len(b.ScrubSet(ctx, sess, "evil.test")); n != 0 {
			t.Fatalf("a host never sent the card would be scrubbed of it: an oracle")
		}
	}
}
