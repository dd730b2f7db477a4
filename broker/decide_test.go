package broker_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// The broker's decisions, table by table, with no listener and no TLS: a
// broker over a real vault and the owner's real rules (owner.Service over
// policy.Engine), all on one SQLite file, on a clock. What proxyd wires,
// minus the proxy.

// clock is the one clock of a world: the broker's, the owner's and the
// vault's.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// vaultOf is the broker's view of a vault.Vault (proxyd's vaultAdapter).
type vaultOf struct{ v *vault.Vault }

func (a vaultOf) List(ctx context.Context, org string) ([]vault.Item, error) {
	return a.v.List(ctx, org)
}
func (a vaultOf) GetByLabel(ctx context.Context, org string, k vault.Kind, label string) (vault.Item, error) {
	return a.v.GetByLabel(ctx, org, k, label)
}
func (a vaultOf) Release(ctx context.Context, r broker.ReleaseArgs) (vault.Secret, error) {
	return a.v.Release(ctx, vault.ReleaseArgs(r))
}

// Where the broker keeps sessions and grants.
const (
	modeMemory = "memory"         // no Store
	modeSingle = "single process" // SQLite, this process's alone
	modeShared = "shared store"   // a Store replicas share: uses claimed in it
)

var modes = []string{modeMemory, modeSingle, modeShared}

// world is one broker with one session, one card (for shop.test) and an
// API key that sees every item, on a site the owner authorized.
type world struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock
	v     *vault.Vault
	own   *owner.Service
	key   owner.APIKey
	card  vault.Item
	b     *broker.Broker
	s     *broker.Session
	token string
}

const cardNumber = "4242424242424242"

func newWorld(t *testing.T, mode string) *world {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Now()}
	mk := make([]byte, 32)
	_, _ = rand.Read(mk)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: mk, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	card, err := v.AddCard(ctx, "o", "owner", vault.CardInput{Number: vault.NewSecret([]byte(cardNumber)),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: clk.now().Year() + 3, Holder: "Ada Lovelace",
		Sites: []string{"shop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	own, err := owner.New(owner.Config{Store: st, Org: "o", Now: clk.now, Engine: policy.NewEngine(policy.Rates{}, hostname.Registrable),
		Password: owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := own.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.AuthorizeSite(ctx, "shop.test", "owner"); err != nil {
		t.Fatal(err)
	}
	cfg := broker.Config{Vault: vaultOf{v}, Authorizer: own, Now: clk.now,
		LookupKey: func(ctx context.Context, apiKey string) (broker.APIKey, error) {
			return broker.APIKey{ID: key.ID, Org: "o", Suffix: "t3st1", Scope: key.Scope.Items()}, nil
		}}
	switch mode {
	case modeSingle:
		cfg.Store, cfg.Notifier, cfg.SingleProcess = st, &broker.LocalNotifier{}, true
	case modeShared:
		cfg.Store, cfg.Notifier = st, &broker.LocalNotifier{}
	}
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.CloseAll)
	s, _, err := b.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ctx: ctx, clk: clk, v: v, own: own, key: key, card: card, b: b, s: s,
		token: "av_card_" + card.Label + "_number_t3st1"}
}

// authorize authorizes the card number for https://shop.test/pay, with a
// checkout total when total is not "" ("12.34 EUR").
func (w *world) authorize(total string) broker.Authorized {
	w.t.Helper()
	req := broker.AuthorizeRequest{Token: w.token, PageURL: "https://shop.test/pay"}
	if total != "" {
		a := policy.MustAmount(total)
		req.Total = &a
	}
	a, err := w.b.Authorize(w.ctx, w.s, req)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// grant is the session's one grant.
func (w *world) grant() *broker.Grant {
	w.t.Helper()
	_, gs := w.s.Grants()
	if len(gs) != 1 {
		w.t.Fatalf("%d grants, want 1", len(gs))
	}
	return gs[0]
}

// release releases the number to dest (host[:port]) for a request with
// wire's fields; the Use is returned undone.
func (w *world) release(dest string, wire broker.WireFields) (*broker.Use, error) {
	w.t.Helper()
	o, err := hostname.Parse(dest, 443)
	if err != nil {
		w.t.Fatal(err)
	}
	u := w.s.NewUse()
	raw, err := w.b.Release(w.ctx, u, w.grant(), o, wire)
	if err == nil {
		if string(raw) != cardNumber {
			w.t.Fatal("Release returned another value")
		}
		clear(raw)
	}
	return u, err
}

// released counts the vault's audit records of the number going on the
// wire (purpose substitute) in this session.
func (w *world) released() int {
	w.t.Helper()
	recs, err := w.v.Audit(w.ctx, vault.AuditFilter{Org: "o", Session: w.s.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Purpose == broker.PurposeSubstitute {
			n++
		}
	}
	return n
}

// form is a form body's pairs as intercept's walk hands them over.
func form(pairs ...string) []policy.WireField {
	var out []policy.WireField
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, policy.WireField{Key: pairs[i], Value: []byte(pairs[i+1]), Group: 1, Pairs: true})
	}
	return out
}

func fields(f []policy.WireField) broker.WireFields {
	return func() ([]broker.WireField, error) { return f, nil }
}

// TestNewRefusesMissingParts: a broker without its vault, its key lookup
// or its authorizer does not start; nothing is ever decided by a missing
// part.
func TestNewRefusesMissingParts(t *testing.T) {
	full := broker.Config{Vault: &fakeVault{}, Authorizer: allowFills{},
		LookupKey: func(context.Context, string) (broker.APIKey, error) { return broker.APIKey{}, nil }}
	if _, err := broker.New(full); err != nil {
		t.Fatalf("a complete config: %v", err)
	}
	for name, drop := range map[string]func(*broker.Config){
		"no vault":      func(c *broker.Config) { c.Vault = nil },
		"no key lookup": func(c *broker.Config) { c.LookupKey = nil },
		"no authorizer": func(c *broker.Config) { c.Authorizer = nil },
		"nothing":       func(c *broker.Config) { *c = broker.Config{} },
	} {
		cfg := full
		drop(&cfg)
		if b, err := broker.New(cfg); err == nil || b != nil || agentvault.ErrorCode(err) != agentvault.CodeInternal {
			t.Errorf("%s: broker %v, err %v", name, b != nil, err)
		}
	}
}

// TestP21_ReleaseDecisions: every reason Release refuses a granted card
// number, in each place sessions live. A refusal releases nothing: the
// vault audits only a value that goes out (P12), so the wire amount check
// and the owner's current state are decided before it.
func TestP21_ReleaseDecisions(t *testing.T) {
	cases := []struct {
		name   string
		total  string                                 // the authorize's checkout total, "" none
		before func(w *world)                         // after the authorize
		dest   string                                 // default shop.test
		wire   func(standIn string) broker.WireFields // nil: no fields
		want   agentvault.Code
	}{
		{name: "the grant's origin"},
		{name: "another host", dest: "evil.test", want: agentvault.CodeDestinationUnauthorized},
		{name: "another port", dest: "shop.test:8443", want: agentvault.CodeDestinationUnauthorized},
		{name: "a subdomain of the card's site", dest: "pay.shop.test", want: agentvault.CodeDestinationUnauthorized},
		{name: "expired", before: func(w *world) { w.clk.add(6 * time.Minute) }, want: agentvault.CodeGrantExpired},
		{name: "within its time", before: func(w *world) { w.clk.add(4 * time.Minute) }},
		{name: "spent on an accepted purchase", before: func(w *world) { w.use(200) }, want: agentvault.CodeGrantUsed},
		{name: "spent on a redirect", before: func(w *world) { w.use(303) }, want: agentvault.CodeGrantUsed},
		{name: "declined, then retried", before: func(w *world) { w.use(402) }},
		{name: "no answer, then retried", before: func(w *world) { w.use(0) }},
		{name: "in use by another request", before: func(w *world) { w.hold() }, want: agentvault.CodeGrantInUse},
		{name: "key revoked", before: func(w *world) { w.must(w.own.Revoke(w.ctx, w.key.ID)) }, want: agentvault.CodeKeyRevoked},
		{name: "key no longer sees the card", before: func(w *world) {
			w.must(w.own.SetScope(w.ctx, w.key.ID, owner.Scope{AllLogins: true}))
		}, want: agentvault.CodeScopeDenied},
		{name: "card paused", before: func(w *world) { w.rules(policy.CardPolicy{Paused: true}) }, want: agentvault.CodeCardPaused},
		{name: "merchant blocked", before: func(w *world) { w.rules(policy.CardPolicy{BlockedMerchants: []string{"shop.test"}}) },
			want: agentvault.CodeMerchantBlocked},
		{name: "site removed", before: func(w *world) { w.must(w.own.RemoveSite(w.ctx, "shop.test")) }, want: agentvault.CodeDestinationUnauthorized},
		{name: "card removed", before: func(w *world) { w.must(w.v.Remove(w.ctx, "o", w.card.ID)) }, want: agentvault.CodeDestinationUnauthorized},
		{name: "card's sites edited", before: func(w *world) {
			_, err := w.v.UpdateCard(w.ctx, "o", w.card.ID, vault.CardUpdate{Sites: []string{"other.test"}})
			w.must(err)
		}, want: agentvault.CodeScopeDenied},
		// The amount on the wire (P18), next to a number authorized for
		// 12.34 EUR.
		{name: "amount under the total", total: "12.34 EUR", wire: wire(form("amount", "1000", "currency", "eur"))},
		{name: "amount equal to the total", total: "12.34 EUR", wire: wire(form("total", "12.34"))},
		{name: "amount over the total", total: "12.34 EUR", wire: wire(form("total", "12.35")), want: agentvault.CodeAmountMismatch},
		{name: "whole units where minor ones are read", total: "12.34 EUR", wire: wire(form("amount", "80", "currency", "eur")),
			want: agentvault.CodeAmountMismatch},
		{name: "amount in another currency", total: "12.34 EUR", wire: wire(form("total", "10.00", "currency", "USD")),
			want: agentvault.CodeAmountUnconvertible},
		{name: "two currencies next to the amount", total: "12.34 EUR", wire: wire(form("total", "1", "currency", "EUR", "currency", "USD")),
			want: agentvault.CodeAmountUnknown},
		{name: "the number in free text", total: "12.34 EUR", wire: func(si string) broker.WireFields {
			return fields([]policy.WireField{{Value: []byte("card " + si + " total 1"), Text: true}})
		}, want: agentvault.CodeAmountUnknown},
		{name: "fields that cannot be read", total: "12.34 EUR", wire: func(string) broker.WireFields {
			return func() ([]broker.WireField, error) {
				return nil, agentvault.Errorf(agentvault.CodeMalformedRequest, "a body that does not parse")
			}
		}, want: agentvault.CodeMalformedRequest},
		{name: "no total authorized, any amount", wire: wire(form("total", "99999"))},
		{name: "a total authorized, no fields", total: "12.34 EUR"},
	}
	for _, mode := range modes {
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				w := newWorld(t, mode)
				a := w.authorize(c.total)
				if c.before != nil {
					c.before(w)
				}
				before := w.released()
				dest := c.dest
				if dest == "" {
					dest = "shop.test"
				}
				var wf broker.WireFields
				if c.wire != nil {
					wf = c.wire(a.Value)
				}
				u, err := w.release(dest, wf)
				defer u.Done(0)
				if got := agentvault.ErrorCode(err); err != nil && got != c.want || err == nil && c.want != "" {
					t.Fatalf("got %v, want %q", err, c.want)
				}
				want := 0
				if c.want == "" {
					want = 1
				}
				if n := w.released() - before; n != want {
					t.Fatalf("%d releases audited, want %d", n, want)
				}
			})
		}
	}
}

func wire(f []policy.WireField) func(string) broker.WireFields {
	return func(string) broker.WireFields { return fields(f) }
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) rules(r policy.CardPolicy) {
	w.t.Helper()
	w.must(w.own.SetCardPolicy(w.ctx, owner.CardPolicy{CardID: w.card.ID, Rules: r}, "owner"))
}

// use sends the number once and settles the request with the site's
// answer (0: none came).
func (w *world) use(status int) {
	w.t.Helper()
	u, err := w.release("shop.test", nil)
	w.must(err)
	u.Done(status)
}

// hold sends the number on a request that has no answer yet.
func (w *world) hold() {
	w.t.Helper()
	u, err := w.release("shop.test", nil)
	w.must(err)
	w.t.Cleanup(func() { u.Done(0) })
}

// TestP21_OnePurchaseUnderConcurrency: many requests race to carry one
// card grant; exactly one gets the number, the others are told it is in
// use, and once the site accepted that one the grant is spent for all. A
// new authorize is a new purchase. In each place sessions live (with a
// shared store the claim is the store's).
func TestP21_OnePurchaseUnderConcurrency(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, mode)
			w.authorize("12.34 EUR")
			const n = 12
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				codes = map[agentvault.Code]int{}
				won   []*broker.Use
			)
			start := make(chan struct{})
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					u, err := w.release("shop.test", nil)
					mu.Lock()
					defer mu.Unlock()
					codes[agentvault.ErrorCode(err)]++
					if err == nil {
						won = append(won, u)
					}
				}()
			}
			close(start)
			wg.Wait()
			if codes[""] != 1 || codes[agentvault.CodeGrantInUse] != n-1 {
				t.Fatalf("outcomes %v, want one release and %d grant_in_use", codes, n-1)
			}
			if r := w.released(); r != 1 {
				t.Fatalf("%d releases audited, want 1", r)
			}
			won[0].Done(200)
			for i := range 3 {
				if _, err := w.release("shop.test", nil); agentvault.ErrorCode(err) != agentvault.CodeGrantUsed {
					t.Fatalf("after the purchase, try %d: %v", i, err)
				}
			}
			w.authorize("12.34 EUR")
			u, err := w.release("shop.test", nil)
			if err != nil {
				t.Fatalf("a new authorize is a new purchase: %v", err)
			}
			u.Done(200)
		})
	}
}

// TestAuthorizeDecisions: what authorize refuses before any grant is made,
// and what it asks the owner about; a refusal counts in the report, a
// question for the owner does not.
func TestAuthorizeDecisions(t *testing.T) {
	cases := []struct {
		name   string
		before func(w *world)
		req    func(w *world) broker.AuthorizeRequest
		want   agentvault.Code
	}{
		{name: "the card on its site", req: page("https://shop.test/pay")},
		{name: "a plain-http page", req: page("http://shop.test/pay"), want: agentvault.CodeInsecurePage},
		{name: "a frame on its site in a plain-http page", req: func(w *world) broker.AuthorizeRequest {
			return broker.AuthorizeRequest{Token: w.token, PageURL: "http://shop.test/", FrameURL: "https://shop.test/pay"}
		}, want: agentvault.CodeInsecurePage},
		{name: "credentials in the page URL", req: page("https://a@shop.test/pay"), want: agentvault.CodeDestinationUnauthorized},
		{name: "another site", req: page("https://evil.test/pay"), want: agentvault.CodeScopeDenied},
		{name: "another key's token", req: func(w *world) broker.AuthorizeRequest {
			return broker.AuthorizeRequest{Token: "av_card_" + w.card.Label + "_number_zzzzz", PageURL: "https://shop.test/pay"}
		}, want: agentvault.CodeUnknownToken},
		{name: "no such card", req: func(w *world) broker.AuthorizeRequest {
			return broker.AuthorizeRequest{Token: "av_card_99_number_t3st1", PageURL: "https://shop.test/pay"}
		}, want: agentvault.CodeUnknownToken},
		{name: "not a token", req: func(w *world) broker.AuthorizeRequest {
			return broker.AuthorizeRequest{Token: "4242", PageURL: "https://shop.test/pay"}
		}, want: agentvault.CodeUnknownToken},
		{name: "key revoked", before: func(w *world) { w.must(w.own.Revoke(w.ctx, w.key.ID)) }, req: page("https://shop.test/pay"),
			want: agentvault.CodeKeyRevoked},
		{name: "card paused", before: func(w *world) { w.rules(policy.CardPolicy{Paused: true}) }, req: page("https://shop.test/pay"),
			want: agentvault.CodeCardPaused},
		{name: "site not authorized: the owner is asked", before: func(w *world) { w.must(w.own.RemoveSite(w.ctx, "shop.test")) },
			req: page("https://shop.test/pay"), want: agentvault.CodeApprovalPending},
		{name: "every purchase asks the owner", before: func(w *world) { w.rules(policy.CardPolicy{EveryPurchase: true}) },
			req: page("https://shop.test/pay"), want: agentvault.CodeApprovalPending},
		{name: "over the cap", before: func(w *world) {
			w.rules(policy.CardPolicy{PerPurchaseCap: ptr(policy.MustAmount("10.00 EUR"))})
		}, req: func(w *world) broker.AuthorizeRequest {
			total := policy.MustAmount("12.34 EUR")
			return broker.AuthorizeRequest{Token: w.token, PageURL: "https://shop.test/pay", Total: &total}
		}, want: agentvault.CodeLimitReached},
		{name: "a closed session", before: func(w *world) {
			_, err := w.b.Close(w.s.ID)
			w.must(err)
		}, req: page("https://shop.test/pay"), want: agentvault.CodeSessionEnded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, modeMemory)
			if c.before != nil {
				c.before(w)
			}
			a, err := w.b.Authorize(w.ctx, w.s, c.req(w))
			if got := agentvault.ErrorCode(err); err != nil && got != c.want || err == nil && c.want != "" {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if err == nil {
				if !a.StandIn || a.Value == cardNumber || len(a.Value) != len(cardNumber) || a.Kind != vault.KindCard {
					t.Fatalf("answer %+v", a)
				}
				return
			}
			_, gs := w.s.Grants()
			if len(gs) != 0 {
				t.Fatalf("a refused authorize made %d grants", len(gs))
			}
			denied := 1
			if c.want == agentvault.CodeApprovalPending || c.want == agentvault.CodeSessionEnded {
				denied = 0
			}
			if n := w.s.Report().DeniedCount; c.want != agentvault.CodeSessionEnded && n != denied {
				t.Fatalf("deniedCount %d, want %d", n, denied)
			}
		})
	}
}

func page(url string) func(w *world) broker.AuthorizeRequest {
	return func(w *world) broker.AuthorizeRequest { return broker.AuthorizeRequest{Token: w.token, PageURL: url} }
}

func ptr[T any](v T) *T { return &v }

// TestP21_PurchasesAreCountedAgain: a grant spent on a purchase is followed
// by a new purchase the caps count again (the owner's daily cap holds
// across them), while renewing an unspent grant counts nothing more.
func TestP21_PurchasesAreCountedAgain(t *testing.T) {
	w := newWorld(t, modeMemory)
	w.rules(policy.CardPolicy{DailyCap: ptr(policy.MustAmount("30.00 EUR"))})
	for range 3 {
		w.authorize("12.34 EUR") // an unspent grant renewed: one purchase
	}
	w.use(200)
	w.authorize("12.34 EUR") // a second purchase: 24.68 EUR today
	w.use(200)
	total := policy.MustAmount("12.34 EUR")
	_, err := w.b.Authorize(w.ctx, w.s, broker.AuthorizeRequest{Token: w.token, PageURL: "https://shop.test/pay", Total: &total})
	if agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("a third purchase over the daily cap: %v", err)
	}
}
