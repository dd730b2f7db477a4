package ownercli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/internal/cardcheck"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
	"gopkg.in/yaml.v3"
)

// Spec is a deployment's owner settings as code: `proxyd owner apply -f
// FILE` makes the store match it, `proxyd owner export` prints the store's
// as one. A section left out of the file is left as it is; a section given
// is the whole truth for what it covers (sites and signups: exactly these;
// each card listed: exactly these rules; each key listed: exactly this
// scope). Cards and keys not listed are left as they are, and a key is
// never revoked for being left out; a notification switch left out of
// notifications is left as it is.
type Spec struct {
	Sites         *[]string    `yaml:"sites,omitempty"`
	Signups       *[]SignupDef `yaml:"signups,omitempty"`
	Cards         []CardDef    `yaml:"cards,omitempty"`
	Keys          []KeyDef     `yaml:"keys,omitempty"`
	Notifications *NotifyDef   `yaml:"notifications,omitempty"`
}

// NotifyDef is the owner's notification switches (the dashboard's
// Notifications page). The channels they turn on and off are proxyd's
// config (notify.webhook, notify.smtp): export names them in a comment,
// their secrets as "set", and apply never changes them.
type NotifyDef struct {
	Webhook    *bool `yaml:"webhook,omitempty"`
	Email      *bool `yaml:"email,omitempty"`
	Browser    *bool `yaml:"browser,omitempty"`
	Challenges *bool `yaml:"challenges,omitempty"`
}

// field is the switch named so in d.
func (d *NotifyDef) field(name string) **bool {
	switch name {
	case "webhook":
		return &d.Webhook
	case "email":
		return &d.Email
	case "browser":
		return &d.Browser
	case "challenges":
		return &d.Challenges
	}
	panic("ownercli: no notification switch " + name)
}

// SignupDef is a pre-approved account creation.
type SignupDef struct {
	Site  string `yaml:"site"`
	Email string `yaml:"email"`
}

// CardDef is one card's rules. Card is its label or id. Where it may be
// used: any_site, or sites (neither: left as it is). Amounts are plain
// decimals in currency; an empty one is no limit.
type CardDef struct {
	Card              string   `yaml:"card"`
	AnySite           bool     `yaml:"any_site,omitempty"`
	Sites             []string `yaml:"sites,omitempty"`
	Currency          string   `yaml:"currency,omitempty"`
	PerPurchase       string   `yaml:"per_purchase,omitempty"`
	Daily             string   `yaml:"daily,omitempty"`
	Monthly           string   `yaml:"monthly,omitempty"`
	ApprovalThreshold string   `yaml:"approval_threshold,omitempty"`
	EveryPurchase     bool     `yaml:"every_purchase,omitempty"`
	LiveCVV           bool     `yaml:"live_cvv,omitempty"`
	StrictAmount      bool     `yaml:"strict_amount,omitempty"`
	Paused            bool     `yaml:"paused,omitempty"`
	BlockedMerchants  []string `yaml:"blocked_merchants,omitempty"`
}

// KeyDef is one API key: found by id when given, else by name (a key
// named so that does not exist yet is created, and its key printed once).
// Cards and logins are labels or ids.
type KeyDef struct {
	ID           string   `yaml:"id,omitempty"`
	Name         string   `yaml:"name"`
	AllCards     bool     `yaml:"all_cards,omitempty"`
	Cards        []string `yaml:"cards,omitempty"`
	AllLogins    bool     `yaml:"all_logins,omitempty"`
	Logins       []string `yaml:"logins,omitempty"`
	CreateLogins bool     `yaml:"create_logins,omitempty"`
	Revoked      bool     `yaml:"revoked,omitempty"`
}

// ParseSpec reads a Spec strictly: an unknown key is refused.
func ParseSpec(r io.Reader) (Spec, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil && err != io.EOF {
		return Spec{}, agentvault.Errorf(agentvault.CodeInvalidInput, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return s, nil
}

// state is what apply compares a Spec with: the owner's records and the
// vault's items.
type state struct {
	svc   *owner.Service
	items []vault.Item
	// notify is Env.Notify: nil where the command has no notification
	// settings to read (export then leaves the block out).
	notify Notifications
}

func (st *state) cardByRef(ref string) (vault.Item, error) {
	for _, it := range st.items {
		if it.Card != nil && (it.ID == ref || it.Label == ref) {
			return it, nil
		}
	}
	return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "no card %q in the vault (`proxyd vault list` shows each card's label and id)", ref)
}

// itemIDs resolves labels or ids of kind k to ids.
func (st *state) itemIDs(k vault.Kind, refs []string) ([]string, error) {
	var out []string
	for _, ref := range refs {
		i := slices.IndexFunc(st.items, func(it vault.Item) bool { return it.Kind == k && (it.ID == ref || it.Label == ref) })
		if i < 0 {
			return nil, agentvault.Errorf(agentvault.CodeNotFound, "no %s %q in the vault (`proxyd vault list` shows labels and ids)", k, ref)
		}
		out = append(out, st.items[i].ID)
	}
	return out, nil
}

// itemLabels maps ids to labels for export (an id of a removed item stays).
func (st *state) itemLabels(ids []string) []string {
	var out []string
	for _, id := range ids {
		label := id
		if i := slices.IndexFunc(st.items, func(it vault.Item) bool { return it.ID == id }); i >= 0 {
			label = st.items[i].Label
		}
		out = append(out, label)
	}
	return out
}

// change is one difference between the store and a Spec, with what
// applies it.
type change struct {
	line  string
	apply func(ctx context.Context) error
}

// plan lists what apply would change, in the file's order, without
// changing anything.
func (st *state) plan(ctx context.Context, s Spec, c *cli) ([]change, error) {
	var out []change
	svc := st.svc
	if s.Sites != nil {
		cur, err := svc.Sites(ctx)
		if err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for _, h := range *s.Sites {
			n, err := hostname.Site(h)
			if err != nil {
				return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "sites: %q is not a host name", h)
			}
			want[n] = true
		}
		have := map[string]bool{}
		for _, d := range cur {
			have[d.Host] = true
			if !want[d.Host] {
				h := d.Host
				out = append(out, change{"- site " + h, func(ctx context.Context) error { return svc.RemoveSite(ctx, h) }})
			}
		}
		for _, h := range sortedKeys(want) {
			if !have[h] {
				out = append(out, change{"+ site " + h, func(ctx context.Context) error { return svc.AuthorizeSite(ctx, h, "owner:apply") }})
			}
		}
	}
	if s.Signups != nil {
		cur, err := svc.Signups(ctx)
		if err != nil {
			return nil, err
		}
		type pair struct{ site, email string }
		want := map[pair]bool{}
		var order []pair
		for _, d := range *s.Signups {
			site, err := hostname.Site(d.Site)
			email := strings.ToLower(strings.TrimSpace(d.Email))
			if err != nil || !strings.Contains(email, "@") {
				return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "signups: %q %q is not a site and an email", d.Site, d.Email)
			}
			if p := (pair{site, email}); !want[p] {
				want[p] = true
				order = append(order, p)
			}
		}
		have := map[pair]bool{}
		for _, g := range cur {
			p := pair{g.Site, g.Email}
			have[p] = true
			if !want[p] {
				out = append(out, change{"- signup " + p.site + " " + p.email, func(ctx context.Context) error { return svc.RemoveSignup(ctx, p.site, p.email) }})
			}
		}
		for _, p := range order {
			if !have[p] {
				out = append(out, change{"+ signup " + p.site + " " + p.email, func(ctx context.Context) error { return svc.AddSignup(ctx, p.site, p.email, "owner:apply") }})
			}
		}
	}
	for _, d := range s.Cards {
		ch, err := st.planCard(ctx, d, c)
		if err != nil {
			return nil, err
		}
		out = append(out, ch...)
	}
	for _, d := range s.Keys {
		ch, err := st.planKey(ctx, d, c)
		if err != nil {
			return nil, err
		}
		out = append(out, ch...)
	}
	if s.Notifications != nil {
		ch, err := planNotify(ctx, *s.Notifications, c)
		if err != nil {
			return nil, err
		}
		out = append(out, ch...)
	}
	return out, nil
}

// planNotify sets the switches the block names and keeps the others.
func planNotify(ctx context.Context, d NotifyDef, c *cli) ([]change, error) {
	n, cur, err := c.notifications(ctx)
	if err != nil {
		return nil, err
	}
	next := cur
	for _, sw := range switches {
		if v := *d.field(sw.name); v != nil {
			*sw.get(&next) = *v
		}
	}
	diff := notifyDiff(cur, next)
	if diff == "" {
		return nil, nil
	}
	return []change{{"~ notifications: " + diff, func(ctx context.Context) error { return n.SetNotifyPrefs(ctx, next) }}}, nil
}

// cardRules turns a CardDef into the owner's rules (owner.SetCardPolicy
// validates them again when they are stored).
func cardRules(d CardDef) (string, policy.CardPolicy, error) {
	cur := strings.ToUpper(strings.TrimSpace(d.Currency))
	r := policy.CardPolicy{EveryPurchase: d.EveryPurchase, LiveCVV: d.LiveCVV, StrictAmount: d.StrictAmount, Paused: d.Paused}
	for _, a := range []struct {
		name, v string
		dst     **policy.Amount
	}{{"per_purchase", d.PerPurchase, &r.PerPurchaseCap}, {"daily", d.Daily, &r.DailyCap}, {"monthly", d.Monthly, &r.MonthlyCap},
		{"approval_threshold", d.ApprovalThreshold, &r.ApprovalThreshold}} {
		v := strings.TrimSpace(a.v)
		if v == "" {
			continue
		}
		if cur == "" {
			return "", r, agentvault.Errorf(agentvault.CodeInvalidInput, "card %s: %s needs the card's currency (currency: EUR)", d.Card, a.name)
		}
		amt, err := policy.ParseDecimal(v, cur)
		if err != nil {
			return "", r, agentvault.Errorf(agentvault.CodeInvalidInput, "card %s: %s %q is not a plain decimal in %s (e.g. 120.50)", d.Card, a.name, v, cur)
		}
		*a.dst = &amt
	}
	for _, m := range d.BlockedMerchants {
		h, err := hostname.Site(m)
		if err != nil {
			return "", r, agentvault.Errorf(agentvault.CodeInvalidInput, "card %s: blocked_merchants: %q is not a host name", d.Card, m)
		}
		if !slices.Contains(r.BlockedMerchants, h) {
			r.BlockedMerchants = append(r.BlockedMerchants, h)
		}
	}
	if !hasAmounts(r) {
		cur = ""
	}
	return cur, r, nil
}

func (st *state) planCard(ctx context.Context, d CardDef, c *cli) ([]change, error) {
	it, err := st.cardByRef(d.Card)
	if err != nil {
		return nil, err
	}
	name := cardcheck.Describe(it)
	cur, rules, err := cardRules(d)
	if err != nil {
		return nil, err
	}
	p, err := st.svc.CardPolicy(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	var diffs []string
	rulesChange := false
	have := defOf(it, p)
	want := CardDef{Card: have.Card, AnySite: have.AnySite, Sites: have.Sites}
	want.Currency, want.PerPurchase, want.Daily, want.Monthly, want.ApprovalThreshold = cur, dec(rules.PerPurchaseCap), dec(rules.DailyCap), dec(rules.MonthlyCap), dec(rules.ApprovalThreshold)
	want.EveryPurchase, want.LiveCVV, want.StrictAmount, want.Paused, want.BlockedMerchants = rules.EveryPurchase, rules.LiveCVV, rules.StrictAmount, rules.Paused, rules.BlockedMerchants
	var sites []string
	sitesChange := false
	if d.AnySite && len(d.Sites) > 0 {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "card %s: give any_site or sites, not both", d.Card)
	}
	if d.AnySite || len(d.Sites) > 0 {
		for _, s := range d.Sites {
			h, err := hostname.Site(s)
			if err != nil {
				return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "card %s: sites: %q is not a host name", d.Card, s)
			}
			if !slices.Contains(sites, h) {
				sites = append(sites, h)
			}
		}
		want.AnySite, want.Sites = d.AnySite, sites
		if want.AnySite != have.AnySite || !sameSet(want.Sites, have.Sites) {
			sitesChange = true
			diffs = append(diffs, "sites "+siteList(have)+" -> "+siteList(want))
		}
	}
	for _, f := range []struct{ name, from, to string }{
		{"currency", have.Currency, want.Currency}, {"per_purchase", have.PerPurchase, want.PerPurchase}, {"daily", have.Daily, want.Daily},
		{"monthly", have.Monthly, want.Monthly}, {"approval_threshold", have.ApprovalThreshold, want.ApprovalThreshold},
		{"every_purchase", fmt.Sprint(have.EveryPurchase), fmt.Sprint(want.EveryPurchase)}, {"live_cvv", fmt.Sprint(have.LiveCVV), fmt.Sprint(want.LiveCVV)},
		{"strict_amount", fmt.Sprint(have.StrictAmount), fmt.Sprint(want.StrictAmount)}, {"paused", fmt.Sprint(have.Paused), fmt.Sprint(want.Paused)},
		{"blocked_merchants", strings.Join(have.BlockedMerchants, ","), strings.Join(want.BlockedMerchants, ",")},
	} {
		if f.from != f.to {
			diffs = append(diffs, f.name+" "+orNone(f.from)+" -> "+orNone(f.to))
			rulesChange = true
		}
	}
	if len(diffs) == 0 {
		return nil, nil
	}
	id, svc := it.ID, st.svc
	return []change{{"~ " + name + ": " + strings.Join(diffs, "; "), func(ctx context.Context) error {
		if sitesChange {
			if c.env.UpdateCard == nil {
				return agentvault.Errorf(agentvault.CodeInternal, "this command cannot change where a card may be used here")
			}
			any := want.AnySite
			u := vault.CardUpdate{AnySite: &any, Actor: "owner:cli"}
			if !any {
				u.Sites = append([]string{}, want.Sites...)
			}
			if _, err := c.env.UpdateCard(ctx, id, u); err != nil {
				return err
			}
		}
		if rulesChange {
			return svc.SetCardPolicy(ctx, owner.CardPolicy{CardID: id, Currency: cur, Rules: rules}, "owner:cli")
		}
		return nil
	}}}, nil
}

func (st *state) planKey(ctx context.Context, d KeyDef, c *cli) ([]change, error) {
	keys, err := st.svc.APIKeys(ctx)
	if err != nil {
		return nil, err
	}
	var k *owner.APIKey
	switch {
	case d.ID != "":
		i := slices.IndexFunc(keys, func(k owner.APIKey) bool { return k.ID == d.ID })
		if i < 0 {
			return nil, agentvault.Errorf(agentvault.CodeNotFound, "keys: no key %s (`proxyd owner keys` lists them; leave id out to create one by name)", d.ID)
		}
		k = &keys[i]
		if d.Name != "" && d.Name != k.Name {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "keys: %s is named %q, not %q (a key's name does not change)", d.ID, k.Name, d.Name)
		}
	case strings.TrimSpace(d.Name) == "":
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "keys: each key needs a name or an id")
	default:
		for i := range keys {
			if keys[i].Name == d.Name {
				if k != nil {
					return nil, agentvault.Errorf(agentvault.CodeConflict, "keys: several keys are named %q: give the one you mean by its id", d.Name)
				}
				k = &keys[i]
			}
		}
	}
	if d.AllCards && len(d.Cards) > 0 || d.AllLogins && len(d.Logins) > 0 {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "keys: %s: all_cards with cards (or all_logins with logins) is one too many", cmpOr(d.ID, d.Name))
	}
	cards, err := st.itemIDs(vault.KindCard, d.Cards)
	if err != nil {
		return nil, err
	}
	logins, err := st.itemIDs(vault.KindLogin, d.Logins)
	if err != nil {
		return nil, err
	}
	scope := owner.Scope{AllCards: d.AllCards, CardIDs: cards, AllLogins: d.AllLogins, LoginIDs: logins, CanCreateLogins: d.CreateLogins}
	svc := st.svc
	if k == nil {
		if d.Revoked {
			return nil, nil // nothing to create: it would be revoked at once
		}
		name := d.Name
		return []change{{"+ key " + name + " (" + scopeText(scope, st) + "; its key is printed once)", func(ctx context.Context) error {
			nk, key, err := svc.CreateAPIKey(ctx, name, scope)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.env.Stderr, "Created %s (%s). The key is shown once; store it where the agent reads it:\n", nk.ID, nk.Name)
			fmt.Fprintln(c.env.Stdout, key)
			return nil
		}}}, nil
	}
	var out []change
	id := k.ID
	if k.Revoked() {
		if !d.Revoked {
			return nil, agentvault.Errorf(agentvault.CodeConflict, "keys: %s (%s) is revoked and stays so: create a new key (leave id out, give another name)", k.ID, k.Name)
		}
		return nil, nil
	}
	if from, to := scopeText(k.Scope, st), scopeText(scope, st); from != to {
		out = append(out, change{"~ key " + id + " (" + k.Name + "): " + from + " -> " + to, func(ctx context.Context) error { return svc.SetScope(ctx, id, scope) }})
	}
	if d.Revoked {
		out = append(out, change{"- key " + id + " (" + k.Name + "): revoked", func(ctx context.Context) error { return svc.Revoke(ctx, id) }})
	}
	return out, nil
}

// export is the store's settings as a Spec (apply of it changes nothing).
func (st *state) export(ctx context.Context) (Spec, error) {
	svc := st.svc
	var s Spec
	sites, err := svc.Sites(ctx)
	if err != nil {
		return s, err
	}
	hosts := []string{}
	for _, d := range sites {
		hosts = append(hosts, d.Host)
	}
	slices.Sort(hosts)
	s.Sites = &hosts
	signups, err := svc.Signups(ctx)
	if err != nil {
		return s, err
	}
	sd := []SignupDef{}
	for _, g := range signups {
		sd = append(sd, SignupDef{g.Site, g.Email})
	}
	s.Signups = &sd
	for _, it := range st.items {
		if it.Card == nil {
			continue
		}
		p, err := svc.CardPolicy(ctx, it.ID)
		if err != nil {
			return s, err
		}
		s.Cards = append(s.Cards, defOf(it, p))
	}
	keys, err := svc.APIKeys(ctx)
	if err != nil {
		return s, err
	}
	for _, k := range keys {
		s.Keys = append(s.Keys, KeyDef{ID: k.ID, Name: k.Name, AllCards: k.Scope.AllCards, Cards: st.itemLabels(k.Scope.CardIDs),
			AllLogins: k.Scope.AllLogins, Logins: st.itemLabels(k.Scope.LoginIDs), CreateLogins: k.Scope.CanCreateLogins, Revoked: k.Revoked()})
	}
	if n := st.notify; n != nil {
		p, err := n.NotifyPrefs(ctx)
		if err != nil {
			return s, err
		}
		d := &NotifyDef{}
		for _, sw := range switches {
			v := *sw.get(&p)
			*d.field(sw.name) = &v
		}
		s.Notifications = d
	}
	return s, nil
}

// channelsComment is export's note above notifications: which channels
// the switches reach, from proxyd's config, with no secret in it.
func channelsComment(ch NotifyChannels) string {
	return "The switches below turn these channels on and off; the channels are proxyd's config\n" +
		"(notify.webhook, notify.smtp), which apply does not change:\n" +
		"webhook: " + describeWebhook(ch.Webhook) + "\n" +
		"email: " + describeEmail(ch.Email)
}

// defOf is a card's CardDef as stored.
func defOf(it vault.Item, p owner.CardPolicy) CardDef {
	r := p.Rules
	d := CardDef{Card: it.Label, AnySite: it.Card.AnySite, Sites: append([]string(nil), it.Card.Sites...), Currency: p.Currency,
		PerPurchase: dec(r.PerPurchaseCap), Daily: dec(r.DailyCap), Monthly: dec(r.MonthlyCap), ApprovalThreshold: dec(r.ApprovalThreshold),
		EveryPurchase: r.EveryPurchase, LiveCVV: r.LiveCVV, StrictAmount: r.StrictAmount, Paused: r.Paused,
		BlockedMerchants: append([]string(nil), r.BlockedMerchants...)}
	if d.AnySite {
		d.Sites = nil
	}
	if !hasAmounts(r) {
		d.Currency = ""
	}
	return d
}

func hasAmounts(r policy.CardPolicy) bool {
	return r.PerPurchaseCap != nil || r.DailyCap != nil || r.MonthlyCap != nil || r.ApprovalThreshold != nil
}

func dec(a *policy.Amount) string {
	if a == nil {
		return ""
	}
	return a.Decimal()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func siteList(d CardDef) string {
	if d.AnySite {
		return "any site"
	}
	if len(d.Sites) == 0 {
		return "none"
	}
	return strings.Join(d.Sites, ",")
}

func scopeText(sc owner.Scope, st *state) string {
	part := func(all bool, ids []string, what string) string {
		switch {
		case all:
			return "all " + what
		case len(ids) == 0:
			return "no " + what
		}
		l := st.itemLabels(ids)
		slices.Sort(l)
		return what + " " + strings.Join(l, ",")
	}
	s := part(sc.AllCards, sc.CardIDs, "cards") + ", " + part(sc.AllLogins, sc.LoginIDs, "logins")
	if sc.CanCreateLogins {
		s += ", creates logins"
	}
	return s
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// loadState reads what plan and export compare against.
// withState runs fn on the owner service and the state apply plans
// against (loadState).
func (c *cli) withState(fn func(s *owner.Service, st *state) error) int {
	return c.with(func(s *owner.Service) error {
		st, err := c.loadState(s)
		if err != nil {
			return err
		}
		return fn(s, st)
	})
}

// withItems is withState for a command that needs the vault's items.
func (c *cli) withItems(fn func(s *owner.Service, st *state) error) int {
	if c.env.Items == nil {
		return c.fail(agentvault.Errorf(agentvault.CodeInternal, "the vault's items are not reachable from here"))
	}
	return c.withState(fn)
}

func (c *cli) loadState(svc *owner.Service) (*state, error) {
	st := &state{svc: svc, notify: c.env.Notify}
	if c.env.Items != nil {
		items, err := c.env.Items(c.ctx)
		if err != nil {
			return nil, err
		}
		st.items = items
	}
	return st, nil
}

// apply is `owner apply -f FILE [--dry-run]`: the diff, then (unless a
// dry run) each change; nothing is written after the first that fails,
// and a second run of the same file changes nothing.
func (c *cli) apply(args []string) int {
	fs := c.flags("apply", "-f FILE [--dry-run]")
	file := fs.String("f", "", "the file (YAML: sites, signups, cards, keys, notifications; - for stdin)")
	dry := fs.Bool("dry-run", false, "print what would change, change nothing")
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	if *file == "" {
		fmt.Fprintln(c.env.Stderr, "error: apply needs -f FILE (proxyd owner export prints one to start from)")
		return exitUsage
	}
	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(c.env.Stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return c.fail(agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read %s", *file))
	}
	spec, err := ParseSpec(bytes.NewReader(data))
	if err != nil {
		return c.fail(agentvault.Errorf(agentvault.CodeInvalidInput, "%s: %s", *file, agentvault.ErrorMessage(err)))
	}
	return c.withState(func(svc *owner.Service, st *state) error {
		changes, err := st.plan(c.ctx, spec, c)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			fmt.Fprintln(c.env.Stderr, "no changes")
			return nil
		}
		for _, ch := range changes {
			if *dry {
				fmt.Fprintln(c.env.Stdout, ch.line)
				continue
			}
			if err := ch.apply(c.ctx); err != nil {
				return agentvault.Wrap(agentvault.ErrorCode(err), err, "%s: %s", ch.line, agentvault.ErrorMessage(err))
			}
			fmt.Fprintln(c.env.Stderr, ch.line)
		}
		if *dry {
			fmt.Fprintf(c.env.Stderr, "dry run: %d change(s), nothing written\n", len(changes))
		}
		return nil
	})
}

// export prints the store's settings in apply's format.
func (c *cli) export(args []string) int {
	fs := c.flags("export", "")
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	return c.withState(func(svc *owner.Service, st *state) error {
		s, err := st.export(c.ctx)
		if err != nil {
			return err
		}
		var doc yaml.Node
		if err := doc.Encode(s); err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "encode the settings")
		}
		if st.notify != nil {
			for i := 0; i+1 < len(doc.Content); i += 2 {
				if doc.Content[i].Value == "notifications" {
					doc.Content[i].HeadComment = channelsComment(st.notify.NotifyChannels())
				}
			}
		}
		enc := yaml.NewEncoder(c.env.Stdout)
		enc.SetIndent(2)
		defer enc.Close()
		return enc.Encode(&doc)
	})
}
