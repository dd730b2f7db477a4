// Package ownercli is `proxyd owner ...`: the owner's commands on the
// appliance itself, above all the first-run `set-password` that creates the
// dashboard account, plus API keys, authorized sites, approvals, card
// rules and notification switches for owners who prefer a shell. It never opens a store itself:
// proxyd hands it the owner service over the store the deployment's config
// names, so a command changes what every replica reads.
//
// A password is read from a no-echo prompt on a terminal, or one line of
// stdin; it must never be taken from an argument or the environment, and a
// new API key is printed once on stdout and never written anywhere else.
package ownercli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/cardcheck"
	"github.com/agentvault/agentvault/internal/termio"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// Env is everything the CLI touches, so tests drive it without a terminal.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	IsTerminal     func() bool
	ReadPassword   func(prompt string) ([]byte, error)
	// Open opens the owner service; the returned func closes it.
	Open func(ctx context.Context) (*owner.Service, func() error, error)
	// Items, when set, lists the vault's items so that `pending` names the
	// card or login an approval is about (without it, or when it fails,
	// the item's id is shown), and pause-card and resume-card find a card
	// by its label or id (without it the argument is taken as the id; when
	// it fails they fail and say why).
	Items func(ctx context.Context) ([]vault.Item, error)
	// UpdateCard, when set, changes where a card may be used (its sites
	// live in the vault item): set-card --sites and apply's cards.
	UpdateCard func(ctx context.Context, id string, u vault.CardUpdate) (vault.Item, error)
	// Notify, when set, reads and changes the owner's notification
	// switches: notify show|on|off and apply's notifications.
	Notify Notifications
}

// DefaultEnv is the real terminal (standard input, a no-echo prompt)
// writing to stdout and stderr, over open (the owner service over the
// store the deployment's config names: proxyd opens it, this package never
// picks a file) and items (the vault's items: pending names the card or
// login, pause-card and resume-card find a card by label; see Env.Items).
func DefaultEnv(open func(context.Context) (*owner.Service, func() error, error), items func(context.Context) ([]vault.Item, error), stdout, stderr io.Writer) Env {
	isTerminal, readPassword := termio.Stdin()
	return Env{
		Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
		IsTerminal: isTerminal, ReadPassword: readPassword,
		Open: open, Items: items,
	}
}

const usage = `usage: proxyd owner <command> [flags]   (proxyd owner <command> -h: its flags)

the dashboard:
  set-password --email E     creates the dashboard account or changes its password
                             (prompted twice without echo, or one line of stdin)
API keys:
  create-key --name N [--all-cards | --cards c,c] [--all-logins | --logins l,l] [--create-logins]
                             prints the new key once (cards and logins by label or id)
  keys [--json]              lists API keys
  set-scope <key-id> [--all-cards | --cards c,c] [--all-logins | --logins l,l] [--create-logins=true|false]
  revoke <key-id>
sites and sign-ups:
  sites [--json]             lists authorized sites
  authorize-site <host|URL>  lets agents fill forms on host and its subdomains
  remove-site <host>
  signups [--json]           lists pre-approved sign-ups
  add-signup <site> <email>  lets an agent create an account on site with email
  remove-signup <site> <email>
cards:
  cards [--json]             lists each card with where it may be used and its rules
  set-card <card> [--sites a,b | --any-site] [--currency EUR] [--per-purchase X] [--daily X]
           [--monthly X] [--approval-threshold X] [--every-purchase] [--live-cvv]
           [--strict-amount] [--blocked-merchants h,h]
                             changes the flags given (an amount "" removes that limit)
  pause-card <card>          refuses every fill and release of the card (its label or id) until
  resume-card <card>         resume-card; grants already given end at their next request
approvals:
  pending [--json]           lists approvals waiting for the owner
  approve <approval-id> | deny <approval-id>
notifications (the dashboard's Notifications page):
  notify show [--json]       the switches, and the channels proxyd's config set up (secrets as "set")
  notify on <switch>...      turns switches on: webhook, email, browser, challenges
  notify off <switch>...     turns them off (the dashboard's banner always shows what waits)
as code:
  export                     prints sites, sign-ups, cards' rules, keys and notification switches
                             as YAML for apply
  apply -f FILE [--dry-run]  makes the store match FILE (a section left out is left as it is);
                             --dry-run prints the changes and writes nothing; a second run changes nothing
`

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Run runs one command and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(env.Stdout, usage)
		return exitOK
	}
	for _, a := range args[1:] {
		if n := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-"); strings.HasPrefix(a, "-") && (n == "password" || n == "pw") {
			fmt.Fprintln(env.Stderr, "error: passwords are never taken from the command line; answer the prompt or pipe it on stdin")
			return exitUsage
		}
	}
	c := &cli{env: env, ctx: ctx}
	cmds := c.commands()
	fn, ok := cmds[args[0]]
	if ok {
		return fn(args[1:])
	}
	// A group's commands are two words ("notify show").
	if subs := groupCommands(cmds, args[0]); len(subs) > 0 {
		if len(args) > 1 {
			if fn, ok := cmds[args[0]+" "+args[1]]; ok {
				return fn(args[2:])
			}
		}
		fmt.Fprintf(env.Stderr, "error: %s takes one of: %s (proxyd owner help)\n", args[0], strings.Join(subs, ", "))
		return exitUsage
	}
	fmt.Fprintf(env.Stderr, "error: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// groupCommands lists the second words of group's commands.
func groupCommands(cmds map[string]func([]string) int, group string) []string {
	var out []string
	for n := range cmds {
		if sub, ok := strings.CutPrefix(n, group+" "); ok {
			out = append(out, sub)
		}
	}
	slices.Sort(out)
	return out
}

type cli struct {
	env Env
	ctx context.Context
	in  *bufio.Reader
}

func (c *cli) fail(err error) int {
	fmt.Fprintf(c.env.Stderr, "error: %s\n", agentvault.ErrorMessage(err))
	if agentvault.ErrorCode(err) == agentvault.CodeInvalidInput {
		return exitUsage
	}
	return exitError
}

func (c *cli) with(fn func(s *owner.Service) error) int {
	if c.env.Open == nil {
		return c.fail(agentvault.Errorf(agentvault.CodeInternal, "no store configured"))
	}
	s, closeFn, err := c.env.Open(c.ctx)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	if err := fn(s); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// flags is a command's flag set; synopsis is what follows the command's
// name in its usage line.
func (c *cli) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: proxyd owner %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse reads flags anywhere among the arguments and wants exactly n
// positional ones (-1: any number). -h prints the command's usage on
// stdout (exit 0); an unknown flag or a wrong count is a usage error
// (exit 2). ok is false when the command must return code.
func (c *cli) parse(fs *flag.FlagSet, args []string, n int) (pos []string, code int, ok bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(c.env.Stdout)
			fs.Usage()
			return nil, exitOK, false
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if n >= 0 && len(pos) != n {
		what := "no arguments"
		switch n {
		case 1:
			what = "exactly one argument"
		case 2:
			what = "exactly two arguments"
		}
		fmt.Fprintf(c.env.Stderr, "error: %s takes %s (proxyd owner %s -h)\n", fs.Name(), what, fs.Name())
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// jsonFlag adds --json (and -o json) to fs: the list as JSON with stable
// field names instead of a table.
func jsonFlag(fs *flag.FlagSet) func() bool {
	on := fs.Bool("json", false, "print JSON (stable field names) instead of a table")
	o := fs.String("o", "", "output format: json (same as --json)")
	return func() bool { return *on || *o == "json" }
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// one is the single positional argument of name, or a usage error.
func (c *cli) one(name, synopsis string, args []string) (string, int, bool) {
	pos, code, ok := c.parse(c.flags(name, synopsis), args, 1)
	if !ok {
		return "", code, false
	}
	return pos[0], exitOK, true
}

func (c *cli) readLine(prompt string) (string, error) {
	if c.env.IsTerminal != nil && c.env.IsTerminal() && c.env.ReadPassword != nil {
		b, err := c.env.ReadPassword(prompt)
		if err != nil {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "could not read the password")
		}
		return string(b), nil
	}
	if c.in == nil {
		if c.env.Stdin == nil {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "no stdin to read the password from")
		}
		c.in = bufio.NewReader(c.env.Stdin)
	}
	line, err := c.in.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "could not read stdin")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (c *cli) setPassword(args []string) int {
	fs := c.flags("set-password", "--email E")
	email := fs.String("email", "", "the owner's email (the dashboard sign-in)")
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	if *email == "" {
		fmt.Fprintln(c.env.Stderr, "error: set-password needs --email and no other argument")
		return exitUsage
	}
	pw, err := c.readLine("New dashboard password: ")
	if err != nil {
		return c.fail(err)
	}
	if c.env.IsTerminal != nil && c.env.IsTerminal() {
		again, err := c.readLine("Repeat it: ")
		if err != nil {
			return c.fail(err)
		}
		if again != pw {
			fmt.Fprintln(c.env.Stderr, "error: the two passwords differ")
			return exitUsage
		}
	}
	return c.with(func(s *owner.Service) error {
		if err := s.SetOwnerPassword(c.ctx, *email, pw); err != nil {
			return err
		}
		fmt.Fprintln(c.env.Stdout, "Password set. Sign in to the dashboard with", strings.ToLower(strings.TrimSpace(*email)))
		return nil
	})
}

func splitIDs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *cli) createKey(args []string) int {
	fs := c.flags("create-key", "--name N [--all-cards | --cards c,c] [--all-logins | --logins l,l] [--create-logins]")
	name := fs.String("name", "", "a name for the key (which agent uses it)")
	allCards := fs.Bool("all-cards", false, "the key sees every card")
	cards := fs.String("cards", "", "comma-separated cards (labels or ids)")
	allLogins := fs.Bool("all-logins", false, "the key sees every login")
	logins := fs.String("logins", "", "comma-separated logins (labels or ids)")
	create := fs.Bool("create-logins", false, "the key may create logins")
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	return c.with(func(s *owner.Service) error {
		cardIDs, loginIDs, err := c.resolveScope(s, splitIDs(*cards), splitIDs(*logins))
		if err != nil {
			return err
		}
		k, key, err := s.CreateAPIKey(c.ctx, *name, owner.Scope{AllCards: *allCards, CardIDs: cardIDs,
			AllLogins: *allLogins, LoginIDs: loginIDs, CanCreateLogins: *create})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.env.Stderr, "Created %s (%s). The key is shown once; store it where the agent reads it:\n", k.ID, k.Name)
		fmt.Fprintln(c.env.Stdout, key)
		return nil
	})
}

func (c *cli) keys(args []string) int {
	return c.listCommand("keys", args, func(s *owner.Service, asJSON bool) error {
		keys, err := s.APIKeys(c.ctx)
		if err != nil {
			return err
		}
		return listing(c, asJSON, keys, keyOf, "", "ID\tNAME\tCARDS\tLOGINS\tCREATE LOGINS\tSTATUS", func(k owner.APIKey) []string {
			cards, logins := fmt.Sprint(len(k.Scope.CardIDs)), fmt.Sprint(len(k.Scope.LoginIDs))
			if k.Scope.AllCards {
				cards = "all"
			}
			if k.Scope.AllLogins {
				logins = "all"
			}
			status := "active"
			if k.Revoked() {
				status = "revoked"
			}
			return []string{k.ID, k.Name, cards, logins, fmt.Sprint(k.Scope.CanCreateLogins), status}
		})
	})
}

// listCommand runs a command that lists something, --json its only flag.
func (c *cli) listCommand(name string, args []string, list func(s *owner.Service, asJSON bool) error) int {
	fs := c.flags(name, "[--json]")
	asJSON := jsonFlag(fs)
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return list(s, asJSON()) })
}

// listing prints rows: with --json as a JSON array (each row as toJSON
// makes it), else a table under header, a line of cells a row; with no
// row, empty instead when it is not "".
func listing[T, J any](c *cli, asJSON bool, rows []T, toJSON func(T) J, empty, header string, cells func(T) []string) error {
	if asJSON {
		out := make([]J, 0, len(rows))
		for _, r := range rows {
			out = append(out, toJSON(r))
		}
		return c.printJSON(out)
	}
	if len(rows) == 0 && empty != "" {
		fmt.Fprintln(c.env.Stdout, empty)
		return nil
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(cells(r), "\t"))
	}
	return tw.Flush()
}

func (c *cli) revoke(args []string) int {
	id, code, ok := c.one("revoke", "<key-id>", args)
	if !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return s.Revoke(c.ctx, id) })
}

func (c *cli) sites(args []string) int {
	return c.listCommand("sites", args, func(s *owner.Service, asJSON bool) error {
		ds, err := s.Sites(c.ctx)
		if err != nil {
			return err
		}
		if asJSON {
			out := []siteJSON{}
			for _, d := range ds {
				out = append(out, siteJSON{Host: d.Host, AddedBy: d.AddedBy, Added: d.Added.UTC()})
			}
			return c.printJSON(out)
		}
		for _, d := range ds {
			fmt.Fprintf(c.env.Stdout, "%s\t%s\n", d.Host, d.AddedBy)
		}
		return nil
	})
}

func (c *cli) authorizeSite(args []string) int {
	h, code, ok := c.one("authorize-site", "<host|URL>", args)
	if !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return s.AuthorizeSite(c.ctx, h, "owner:cli") })
}

func (c *cli) removeSite(args []string) int {
	h, code, ok := c.one("remove-site", "<host>", args)
	if !ok {
		return code
	}
	return c.with(func(s *owner.Service) error { return s.RemoveSite(c.ctx, h) })
}

func (c *cli) pending(args []string) int {
	return c.listCommand("pending", args, func(s *owner.Service, asJSON bool) error {
		ps, err := s.Pending(c.ctx)
		if err != nil {
			return err
		}
		var names map[string]string
		if len(ps) > 0 {
			names = c.itemNames()
		}
		toJSON := func(a owner.Approval) pendingJSON { return pendingOf(a, names) }
		return listing(c, asJSON, ps, toJSON, "Nothing is waiting for you.", "ID\tREQUEST\tSITE\tITEM\tAMOUNT\tEXPIRES\tPAGE", func(a owner.Approval) []string {
			// The kind says what is asked; the reason only when it adds
			// something (a new site's reason is its kind).
			what := string(a.Kind)
			if a.Reason != "" && a.Reason != string(a.Kind) {
				what += " (" + a.Reason + ")"
			}
			amount := "-"
			if a.Amount != nil {
				amount = a.Amount.String()
			}
			item := "-"
			if id := cmp.Or(a.ItemID, a.CardID); id != "" {
				item = cmp.Or(names[id], id)
			}
			return []string{a.ID, what, a.Site, item, amount, a.Expires.Local().Format("15:04:05"), cmp.Or(a.Page, "-")}
		})
	})
}

// itemNames names the vault's items by id without a secret (a card: its
// label, brand, last 4 and expiry; a login: its label and site). Without
// the vault it is empty, and ids are shown.
func (c *cli) itemNames() map[string]string {
	if c.env.Items == nil {
		return nil
	}
	items, err := c.env.Items(c.ctx)
	if err != nil {
		return nil
	}
	names := make(map[string]string, len(items))
	for _, it := range items {
		switch {
		case it.Card != nil:
			names[it.ID] = cardcheck.Describe(it)
		case it.Login != nil:
			names[it.ID] = "login " + it.Label + ": " + it.Login.Site
		default:
			names[it.ID] = string(it.Kind) + " " + it.Label
		}
	}
	return names
}

func (c *cli) decide(approve bool) func([]string) int {
	return func(args []string) int {
		name := "deny"
		if approve {
			name = "approve"
		}
		id, code, ok := c.one(name, "<approval-id>", args)
		if !ok {
			return code
		}
		return c.with(func(s *owner.Service) error {
			a, err := s.Decide(c.ctx, id, approve, "owner:cli")
			if err != nil {
				return err
			}
			fmt.Fprintf(c.env.Stdout, "%s %s\n", a.ID, a.Status)
			return nil
		})
	}
}

// commands is every command by name.
func (c *cli) commands() map[string]func([]string) int {
	return map[string]func([]string) int{
		"set-password": c.setPassword, "create-key": c.createKey, "keys": c.keys, "revoke": c.revoke,
		"sites": c.sites, "authorize-site": c.authorizeSite, "remove-site": c.removeSite,
		"pending": c.pending, "approve": c.decide(true), "deny": c.decide(false),
		"pause-card": c.setPaused(true), "resume-card": c.setPaused(false),
		"set-scope": c.setScope, "signups": c.signups, "add-signup": c.addSignup, "remove-signup": c.removeSignup,
		"cards": c.cards, "set-card": c.setCard, "apply": c.apply, "export": c.export,
		"notify show": c.notifyShow, "notify on": c.notifySet(true), "notify off": c.notifySet(false),
	}
}

// Commands lists the command names ("notify show": a group's commands
// are two words), for the test that holds them against package authz's
// table of who may do what.
func Commands() []string {
	var out []string
	for n := range (&cli{}).commands() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// setPaused pauses or resumes a card: its rules keep everything else.
// Every release re-reads them (owner.Service.Recheck), so an open grant
// of the card ends at its next request on every replica.
func (c *cli) setPaused(paused bool) func([]string) int {
	name, done := "pause-card", "paused: every fill and release of it is refused until `proxyd owner resume-card %s`\n"
	if !paused {
		name, done = "resume-card", "resumed: it may be used again under its rules (%s)\n"
	}
	return func(args []string) int {
		ref, code, ok := c.one(name, "<card>", args)
		if !ok {
			return code
		}
		return c.with(func(s *owner.Service) error {
			id, what, err := c.card(ref)
			if err != nil {
				return err
			}
			p, err := s.CardPolicy(c.ctx, id)
			if err != nil {
				return err
			}
			p.Rules.Paused = paused
			if err := s.SetCardPolicy(c.ctx, p, "owner:cli"); err != nil {
				return err
			}
			fmt.Fprintf(c.env.Stdout, "%s "+done, strings.ToUpper(what[:1])+what[1:], ref)
			return nil
		})
	}
}

// card finds a card by its id or label among the vault's items; without
// Items the reference is taken as the card's id.
func (c *cli) card(ref string) (id, what string, err error) {
	if c.env.Items == nil {
		return ref, "card " + ref, nil
	}
	items, err := c.env.Items(c.ctx)
	if err != nil {
		return "", "", err
	}
	for _, it := range items {
		if it.Card != nil && (it.ID == ref || it.Label == ref) {
			return it.ID, cardcheck.Describe(it), nil
		}
	}
	return "", "", agentvault.Errorf(agentvault.CodeNotFound, "no card %q in the vault (`proxyd vault list` shows each card's label and id)", ref)
}
