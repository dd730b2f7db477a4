package ownercli

import (
	"cmp"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/cardcheck"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// The JSON shapes of the list commands (--json). Field names are part of
// the CLI's contract: scripts read them, so they only ever gain fields.

type keyJSON struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	AllCards     bool       `json:"allCards"`
	Cards        []string   `json:"cards"`
	AllLogins    bool       `json:"allLogins"`
	Logins       []string   `json:"logins"`
	CreateLogins bool       `json:"createLogins"`
	Status       string     `json:"status"` // active or revoked
	Created      time.Time  `json:"created"`
	RevokedAt    *time.Time `json:"revokedAt"`
}

func keyOf(k owner.APIKey) keyJSON {
	j := keyJSON{ID: k.ID, Name: k.Name, AllCards: k.Scope.AllCards, Cards: nonNil(k.Scope.CardIDs), AllLogins: k.Scope.AllLogins,
		Logins: nonNil(k.Scope.LoginIDs), CreateLogins: k.Scope.CanCreateLogins, Status: "active", Created: k.Created.UTC()}
	if k.Revoked() {
		at := k.RevokedAt.UTC()
		j.Status, j.RevokedAt = "revoked", &at
	}
	return j
}

type siteJSON struct {
	Host    string    `json:"host"`
	AddedBy string    `json:"addedBy"`
	Added   time.Time `json:"added"`
}

type signupJSON struct {
	Site    string    `json:"site"`
	Email   string    `json:"email"`
	AddedBy string    `json:"addedBy"`
	Added   time.Time `json:"added"`
}

type amountJSON struct {
	Value    string `json:"value"` // a plain decimal, e.g. "12.00"
	Currency string `json:"currency"`
}

type pendingJSON struct {
	ID       string      `json:"id"`
	Kind     string      `json:"kind"`
	Reason   string      `json:"reason"`
	Site     string      `json:"site"`
	ItemID   string      `json:"itemId"`
	Item     string      `json:"item"` // the card or login, named without a secret
	CardID   string      `json:"cardId"`
	Amount   *amountJSON `json:"amount"`
	Page     string      `json:"page"`
	APIKeyID string      `json:"apiKeyId"`
	Created  time.Time   `json:"created"`
	Expires  time.Time   `json:"expires"`
}

func pendingOf(a owner.Approval, names map[string]string) pendingJSON {
	j := pendingJSON{ID: a.ID, Kind: string(a.Kind), Reason: a.Reason, Site: a.Site, ItemID: a.ItemID, CardID: a.CardID,
		Page: a.Page, APIKeyID: a.APIKeyID, Created: a.Created.UTC(), Expires: a.Expires.UTC()}
	if id := cmp.Or(a.ItemID, a.CardID); id != "" {
		j.Item = cmp.Or(names[id], id)
	}
	if a.Amount != nil {
		j.Amount = &amountJSON{Value: a.Amount.Decimal(), Currency: a.Amount.Currency}
	}
	return j
}

type cardJSON struct {
	ID                string      `json:"id"`
	Label             string      `json:"label"`
	Card              string      `json:"card"` // brand, last 4 and expiry
	AnySite           bool        `json:"anySite"`
	Sites             []string    `json:"sites"`
	Currency          string      `json:"currency"`
	PerPurchase       *amountJSON `json:"perPurchase"`
	Daily             *amountJSON `json:"daily"`
	Monthly           *amountJSON `json:"monthly"`
	ApprovalThreshold *amountJSON `json:"approvalThreshold"`
	EveryPurchase     bool        `json:"everyPurchase"`
	LiveCVV           bool        `json:"liveCVV"`
	StrictAmount      bool        `json:"strictAmount"`
	Paused            bool        `json:"paused"`
	BlockedMerchants  []string    `json:"blockedMerchants"`
}

func amountOf(v, cur string) *amountJSON {
	if v == "" {
		return nil
	}
	return &amountJSON{Value: v, Currency: cur}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// resolveScope turns card and login labels (or ids) into ids.
func (c *cli) resolveScope(s *owner.Service, cards, logins []string) ([]string, []string, error) {
	if c.env.Items == nil {
		return cards, logins, nil
	}
	st, err := c.loadState(s)
	if err != nil {
		return nil, nil, err
	}
	cardIDs, err := st.itemIDs(vault.KindCard, cards)
	if err != nil {
		return nil, nil, err
	}
	loginIDs, err := st.itemIDs(vault.KindLogin, logins)
	return cardIDs, loginIDs, err
}

// parseChange reads the command line of a command that changes what its
// flags name of one thing: the thing, and the flags given (one at least).
func (c *cli) parseChange(fs *flag.FlagSet, name string, args []string) ([]string, map[string]bool, int, bool) {
	pos, code, ok := c.parse(fs, args, 1)
	if !ok {
		return nil, nil, code, false
	}
	set := visited(fs)
	if len(set) == 0 {
		fmt.Fprintf(c.env.Stderr, "error: %s changes nothing without a flag (proxyd owner %s -h)\n", name, name)
		return nil, nil, exitUsage, false
	}
	return pos, set, 0, true
}

// setScope changes the scope flags given of one key, through apply's plan.
func (c *cli) setScope(args []string) int {
	fs := c.flags("set-scope", "<key-id> [--all-cards | --cards c,c] [--all-logins | --logins l,l] [--create-logins=true|false]")
	allCards := fs.Bool("all-cards", false, "the key sees every card")
	cards := fs.String("cards", "", "comma-separated cards (labels or ids); \"\" for none")
	allLogins := fs.Bool("all-logins", false, "the key sees every login")
	logins := fs.String("logins", "", "comma-separated logins (labels or ids); \"\" for none")
	create := fs.Bool("create-logins", false, "the key may create logins")
	pos, set, code, ok := c.parseChange(fs, "set-scope", args)
	if !ok {
		return code
	}
	return c.withState(func(s *owner.Service, st *state) error {
		exp, err := st.export(c.ctx)
		if err != nil {
			return err
		}
		var d *KeyDef
		for i := range exp.Keys {
			if exp.Keys[i].ID == pos[0] {
				d = &exp.Keys[i]
			}
		}
		if d == nil {
			return agentvault.Errorf(agentvault.CodeNotFound, "no key %s (`proxyd owner keys` lists them)", pos[0])
		}
		if set["all-cards"] || set["cards"] {
			d.AllCards, d.Cards = *allCards, splitIDs(*cards)
		}
		if set["all-logins"] || set["logins"] {
			d.AllLogins, d.Logins = *allLogins, splitIDs(*logins)
		}
		if set["create-logins"] {
			d.CreateLogins = *create
		}
		return c.runPlan(st, Spec{Keys: []KeyDef{*d}})
	})
}

// runPlan applies a Spec and says what changed ("no changes" when nothing).
func (c *cli) runPlan(st *state, s Spec) error {
	changes, err := st.plan(c.ctx, s, c)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintln(c.env.Stdout, "no changes")
	}
	for _, ch := range changes {
		if err := ch.apply(c.ctx); err != nil {
			return err
		}
		fmt.Fprintln(c.env.Stdout, ch.line)
	}
	return nil
}

func visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func (c *cli) signups(args []string) int {
	return c.listCommand("signups", args, func(s *owner.Service, asJSON bool) error {
		gs, err := s.Signups(c.ctx)
		if err != nil {
			return err
		}
		toJSON := func(g owner.Signup) signupJSON {
			return signupJSON{Site: g.Site, Email: g.Email, AddedBy: g.AddedBy, Added: g.Added.UTC()}
		}
		return listing(c, asJSON, gs, toJSON, "No sign-ups are pre-approved.", "SITE\tEMAIL\tADDED BY", func(g owner.Signup) []string {
			return []string{g.Site, g.Email, g.AddedBy}
		})
	})
}

func (c *cli) addSignup(args []string) int {
	pos, code, ok := c.parse(c.flags("add-signup", "<site> <email>"), args, 2)
	if !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return s.AddSignup(c.ctx, pos[0], pos[1], "owner:cli") })
}

func (c *cli) removeSignup(args []string) int {
	pos, code, ok := c.parse(c.flags("remove-signup", "<site> <email>"), args, 2)
	if !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return s.RemoveSignup(c.ctx, pos[0], pos[1]) })
}

// cards lists every card of the vault with where it may be used and its
// rules.
func (c *cli) cards(args []string) int {
	fs := c.flags("cards", "[--json]")
	asJSON := jsonFlag(fs)
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	return c.withItems(func(s *owner.Service, st *state) error {
		out := []cardJSON{}
		for _, it := range st.items {
			if it.Card == nil {
				continue
			}
			p, err := s.CardPolicy(c.ctx, it.ID)
			if err != nil {
				return err
			}
			d := defOf(it, p)
			out = append(out, cardJSON{ID: it.ID, Label: it.Label, Card: strings.TrimPrefix(cardcheck.Describe(it), "card "+it.Label+": "),
				AnySite: d.AnySite, Sites: nonNil(d.Sites), Currency: d.Currency, PerPurchase: amountOf(d.PerPurchase, d.Currency),
				Daily: amountOf(d.Daily, d.Currency), Monthly: amountOf(d.Monthly, d.Currency), ApprovalThreshold: amountOf(d.ApprovalThreshold, d.Currency),
				EveryPurchase: d.EveryPurchase, LiveCVV: d.LiveCVV, StrictAmount: d.StrictAmount, Paused: d.Paused, BlockedMerchants: nonNil(d.BlockedMerchants)})
		}
		same := func(j cardJSON) cardJSON { return j }
		return listing(c, asJSON(), out, same, "No cards in the vault.", "LABEL\tCARD\tSITES\tPER PURCHASE\tDAILY\tMONTHLY\tASK ABOVE\tRULES", func(j cardJSON) []string {
			sites := strings.Join(j.Sites, ",")
			if j.AnySite {
				sites = "any"
			}
			var flags []string
			for _, f := range []struct {
				on   bool
				name string
			}{{j.Paused, "paused"}, {j.EveryPurchase, "every-purchase"}, {j.LiveCVV, "live-cvv"}, {j.StrictAmount, "strict-amount"}} {
				if f.on {
					flags = append(flags, f.name)
				}
			}
			if len(j.BlockedMerchants) > 0 {
				flags = append(flags, "blocks "+strings.Join(j.BlockedMerchants, ","))
			}
			a := func(x *amountJSON) string {
				if x == nil {
					return "-"
				}
				return x.Value + " " + x.Currency
			}
			return []string{j.Label, j.Card, cmp.Or(sites, "-"), a(j.PerPurchase), a(j.Daily), a(j.Monthly),
				a(j.ApprovalThreshold), cmp.Or(strings.Join(flags, " "), "-")}
		})
	})
}

// setCard changes the flags given of one card's rules and sites (the
// others keep their value), through apply's plan.
func (c *cli) setCard(args []string) int {
	fs := c.flags("set-card", "<card> [flags]   (only the flags given change)")
	sites := fs.String("sites", "", "comma-separated sites the card may be used on (turns any-site off)")
	anySite := fs.Bool("any-site", false, "the card may be used on any authorized site")
	currency := fs.String("currency", "", "ISO 4217 currency of the card's limits, e.g. EUR")
	per := fs.String("per-purchase", "", "cap per purchase, a plain decimal (\"\": none)")
	daily := fs.String("daily", "", "cap per day (\"\": none)")
	monthly := fs.String("monthly", "", "cap per month (\"\": none)")
	threshold := fs.String("approval-threshold", "", "ask the owner for a total above this (\"\": never for the amount)")
	every := fs.Bool("every-purchase", false, "ask the owner for every purchase")
	live := fs.Bool("live-cvv", false, "the owner types the security code at each purchase")
	strict := fs.Bool("strict-amount", false, "a total the page does not show always asks the owner")
	blocked := fs.String("blocked-merchants", "", "comma-separated hosts the card is never used on (\"\": none)")
	pos, set, code, ok := c.parseChange(fs, "set-card", args)
	if !ok {
		return code
	}
	if set["sites"] && set["any-site"] {
		fmt.Fprintln(c.env.Stderr, "error: give --sites or --any-site, not both")
		return exitUsage
	}
	return c.withItems(func(s *owner.Service, st *state) error {
		it, err := st.cardByRef(pos[0])
		if err != nil {
			return err
		}
		p, err := s.CardPolicy(c.ctx, it.ID)
		if err != nil {
			return err
		}
		d := defOf(it, p)
		d.Card = it.ID
		if set["sites"] {
			d.AnySite, d.Sites = false, splitIDs(*sites)
			if len(d.Sites) == 0 {
				return agentvault.Errorf(agentvault.CodeInvalidInput, "--sites names no site (--any-site for every authorized site)")
			}
		}
		if set["any-site"] {
			d.AnySite, d.Sites = *anySite, nil
			if !*anySite {
				return agentvault.Errorf(agentvault.CodeInvalidInput, "--any-site=false needs --sites instead")
			}
		}
		for _, f := range []struct {
			name     string
			dst, src *string
		}{{"currency", &d.Currency, currency}, {"per-purchase", &d.PerPurchase, per}, {"daily", &d.Daily, daily},
			{"monthly", &d.Monthly, monthly}, {"approval-threshold", &d.ApprovalThreshold, threshold}} {
			if set[f.name] {
				*f.dst = *f.src
			}
		}
		for _, f := range []struct {
			name     string
			dst, src *bool
		}{{"every-purchase", &d.EveryPurchase, every}, {"live-cvv", &d.LiveCVV, live}, {"strict-amount", &d.StrictAmount, strict}} {
			if set[f.name] {
				*f.dst = *f.src
			}
		}
		if set["blocked-merchants"] {
			d.BlockedMerchants = splitIDs(*blocked)
		}
		return c.runPlan(st, Spec{Cards: []CardDef{d}})
	})
}
