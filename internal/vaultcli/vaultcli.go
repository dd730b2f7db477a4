package vaultcli

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/cardcheck"
	"github.com/agentvault/agentvault/internal/termio"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// Env is everything the CLI touches, so tests drive it without a terminal.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// IsTerminal reports whether Stdin is a terminal (then secrets are
	// prompted for with ReadPassword, which must not echo).
	IsTerminal   func() bool
	ReadPassword func(prompt string) ([]byte, error)
	// Open opens the vault; the returned func closes it.
	Open func(ctx context.Context) (*vault.Vault, func() error, error)
	// KeyFile is the master key file rotate-key replaces.
	KeyFile string
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the vault refused or failed (sealed, not found, I/O)
	exitUsage = 2 // bad command line or bad input; nothing was written
)

// File names under the data directory.
const (
	KeyFileName = "master.key"
	DBFileName  = "vault.db"
)

// DefaultEnv is the real terminal (standard input, a no-echo prompt)
// writing to stdout and stderr, over open, which opens the deployment's
// vault: proxyd opens it over the store its config names (SQLite or
// Postgres), this package never picks a file. dataDir holds the master
// key file rotate-key replaces.
func DefaultEnv(dataDir string, open func(context.Context) (*vault.Vault, func() error, error), stdout, stderr io.Writer) Env {
	isTerminal, readPassword := termio.Stdin()
	return Env{
		Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
		IsTerminal: isTerminal, ReadPassword: readPassword,
		Open:    open,
		KeyFile: filepath.Join(dataDir, KeyFileName),
	}
}

// OpenSQLite opens the data directory's database (creating the directory),
// refusing a database whose master key file is missing. proxyd opens its
// SQLite store here, once per process, for the daemon and the CLI alike.
func OpenSQLite(dataDir string) (*sqlite.Store, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the data directory %s: %s", dataDir, Reason(err))
	}
	keyPath := filepath.Join(dataDir, KeyFileName)
	dbPath := filepath.Join(dataDir, DBFileName)
	// The vault's and the store's own errors do not name the file; say
	// which one this process cannot use, and why, before they are tried.
	if err := checkAccess(dataDir, keyPath, dbPath); err != nil {
		return nil, err
	}
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		if st, err := os.Stat(dbPath); err == nil && st.Size() > 0 {
			// Creating a fresh key would only hide the real problem.
			return nil, agentvault.Errorf(agentvault.CodeSealed, "vault database exists but its master key file %s is missing", keyPath)
		}
	}
	return sqlite.Open(dbPath)
}

// OpenStore opens the vault over an open store (SQLite in the data
// directory, or a shared Postgres) with the master key file of dataDir
// (created at first start of an empty store). A store that already holds
// keys while the key file is missing is refused (sealed): a replica joining
// a shared store needs the deployment's master.key copied to it first.
// If <data>/master.key.old exists, a rotation was interrupted; the old key
// is passed as a previous key so the vault can finish it. The caller keeps
// and closes st.
func OpenStore(ctx context.Context, dataDir string, st vault.Store) (*vault.Vault, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the data directory")
	}
	keyPath := filepath.Join(dataDir, KeyFileName)
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		keys, err := st.Keys(ctx)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			return nil, agentvault.Errorf(agentvault.CodeSealed, "the vault store holds data but the master key file %s is missing", keyPath)
		}
	}
	key, _, _, err := vault.LoadOrCreateKeyFile(keyPath)
	if err != nil {
		return nil, err
	}
	var prev [][]byte
	oldPath := keyPath + ".old"
	if old, err := vault.ReadKeyFile(oldPath); err == nil {
		prev = append(prev, old)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// When the owner rotates the key from another process, a running
	// proxyd re-reads the key files for the new key id.
	loader := func(id string) ([]byte, error) {
		for _, p := range []string{keyPath, oldPath} {
			if k, err := vault.ReadKeyFile(p); err == nil && vault.KeyIDFor(k) == id {
				return k, nil
			}
		}
		return nil, vault.ErrSealed
	}
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, PreviousKeys: prev, KeyLoader: loader})
	if err != nil {
		return nil, err
	}
	if len(prev) > 0 && v.ActiveKeyID() == vault.KeyIDFor(key) {
		_ = os.Remove(oldPath) // the rotation is complete
	}
	return v, nil
}

// Reason is the operating system's reason for a failed file operation
// ("permission denied", "no such file or directory"), without the path
// (the caller names it) or Go's wrapping.
func Reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}

// checkAccess opens the directory and each existing file for reading and
// writing, so a permission problem is reported with its path and reason.
func checkAccess(dir string, files ...string) error {
	d, err := os.Open(dir)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the data directory %s: %s", dir, Reason(err))
	}
	d.Close()
	for _, p := range files {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "cannot open %s: %s", p, Reason(err))
		}
		f.Close()
	}
	return nil
}

const usage = `usage: vault <command> [flags]

commands:
  add-card      --exp MM/YY or MM/YYYY [--holder NAME] (--sites a.com,b.com | --any-site) [--live-cvv]
                reads the card number, then the CVV, from stdin (or prompts without echo)
  add-login     --site DOMAIN [--website URL] [--email E] [--username U]
                reads the password, then an optional TOTP seed, from stdin (or prompts)
  add-identity  --name NAME [--email E] [--phone P]
  add-address   --line1 L [--line2 L] --city C [--region R] --postal-code P --country CC [--name N]
  list   [--json]
  show   <item-id> | <kind> <label>   [--json]
  remove <item-id> | <kind> <label>
  rotate-key    re-wraps every data key under a new master key file

every command takes --org (default "default"); add commands take --owner (default "owner");
proxyd vault <command> -h prints its flags. secrets are never read from arguments or the environment.
`

// Run runs one CLI command and returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(env.Stdout, usage)
		return exitOK
	}
	c := &cli{env: env, ctx: ctx}
	for _, a := range args[1:] {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if strings.HasPrefix(a, "-") && secretFlag[name] {
			return c.usageErr("secrets are never taken from the command line; pipe them on stdin or answer the prompt")
		}
	}
	fn, ok := c.commands()[args[0]]
	if !ok {
		return c.usageErr(fmt.Sprintf("unknown command %q", args[0]))
	}
	code := fn(args[1:])
	if c.helped {
		return exitOK
	}
	return code
}

var secretFlag = map[string]bool{"number": true, "card-number": true, "cvv": true, "cvc": true, "password": true, "totp": true, "secret": true}

type cli struct {
	env Env
	ctx context.Context
	in  *bufio.Reader
	// helped is set when a command answered -h (its exit code is 0).
	helped bool
}

func (c *cli) usageErr(msg string) int {
	if c.helped {
		return exitOK
	}
	fmt.Fprintf(c.env.Stderr, "error: %s\n", msg)
	return exitUsage
}

// fail prints a coded error's public message (never its internal cause) and
// maps invalid input to exit 2.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.env.Stderr, "error: %s\n", agentvault.ErrorMessage(err))
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeInvalidInput, agentvault.CodeInvalidParams:
		return exitUsage
	}
	return exitError
}

// parse parses flags anywhere among the positional arguments; -h prints
// the command's flags on stdout (c.helped is then set: exit 0).
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, bool) {
	fs.SetOutput(c.env.Stderr)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprintf(c.env.Stdout, "usage: proxyd vault %s [flags]\n", fs.Name())
			fs.SetOutput(c.env.Stdout)
			fs.PrintDefaults()
			c.helped = true
			return nil, false
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return pos, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func newFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	org := fs.String("org", "default", "organisation")
	return fs, org
}

// readSecret reads one secret: a no-echo prompt on a terminal, else one line
// of stdin. optional secrets may be empty (or missing at EOF).
func (c *cli) readSecret(prompt string, optional bool) ([]byte, error) {
	if c.env.IsTerminal != nil && c.env.IsTerminal() {
		if c.env.ReadPassword == nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "no way to prompt for a secret")
		}
		b, err := c.env.ReadPassword(prompt)
		if err != nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "could not read the secret")
		}
		if len(b) == 0 && !optional {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "%s is required", strings.TrimSuffix(prompt, ": "))
		}
		return b, nil
	}
	if c.in == nil {
		if c.env.Stdin == nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "no stdin to read secrets from")
		}
		c.in = bufio.NewReader(c.env.Stdin)
	}
	line, err := c.in.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "could not read stdin")
	}
	b := []byte(strings.TrimRight(line, "\r\n"))
	if len(b) == 0 && !optional {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "%s is required on stdin, one per line", strings.TrimSuffix(prompt, ": "))
	}
	return b, nil
}

// withVault opens the vault, runs fn, and closes it.
func (c *cli) withVault(fn func(v *vault.Vault) int) int {
	if c.env.Open == nil {
		return c.fail(agentvault.Errorf(agentvault.CodeInternal, "no vault configured"))
	}
	v, closeFn, err := c.env.Open(c.ctx)
	if err != nil {
		return c.fail(err)
	}
	defer closeFn()
	return fn(v)
}

// parseExpiry reads MM/YYYY or MM/YY as printed on cards (the dashboard
// takes a two-digit year too): YY is 20YY.
func parseExpiry(s string) (month, year int, ok bool) {
	m, y, found := strings.Cut(strings.TrimSpace(s), "/")
	if !found || (len(y) != 4 && len(y) != 2) || len(m) < 1 || len(m) > 2 {
		return 0, 0, false
	}
	month, err1 := strconv.Atoi(m)
	year, err2 := strconv.Atoi(y)
	if len(y) == 2 {
		year += 2000
	}
	return month, year, err1 == nil && err2 == nil && month >= 1 && month <= 12
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func digitsOnly(b []byte) []byte {
	out := b[:0:0]
	for _, ch := range b {
		if ch != ' ' && ch != '-' {
			out = append(out, ch)
		}
	}
	return out
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 0
	}
}

func (c *cli) addCard(args []string) int {
	fs, org := newFlags("add-card")
	owner := fs.String("owner", "owner", "owner")
	exp := fs.String("exp", "", "expiry MM/YY or MM/YYYY")
	holder := fs.String("holder", "", "name on the card")
	sites := fs.String("sites", "", "comma-separated sites the card may be used on")
	anySite := fs.Bool("any-site", false, "usable on any authorized destination")
	liveCVV := fs.Bool("live-cvv", false, "never store the CVV; the owner types it per purchase")
	pos, ok := c.parse(fs, args)
	if !ok {
		return exitUsage
	}
	if len(pos) > 0 {
		return c.usageErr("add-card takes no arguments (the number is read from stdin)")
	}
	month, year, ok := parseExpiry(*exp)
	if !ok {
		return c.usageErr("--exp must be MM/YY or MM/YYYY, e.g. 12/30 or 12/2030")
	}
	if *anySite == (*sites != "") {
		return c.usageErr("give exactly one of --sites and --any-site")
	}
	number, err := c.readSecret("Card number: ", false)
	if err != nil {
		return c.fail(err)
	}
	raw := number
	number = digitsOnly(number)
	wipe(raw)
	defer wipe(number)
	var cvv []byte
	if !*liveCVV {
		if cvv, err = c.readSecret("CVV: ", false); err != nil {
			return c.fail(err)
		}
		defer wipe(cvv)
	}
	in := vault.CardInput{
		Number: vault.NewSecret(number), CVV: vault.NewSecret(cvv), ExpiryMonth: month, ExpiryYear: year,
		Holder: *holder, AnySite: *anySite, Sites: splitList(*sites), LiveCVV: *liveCVV,
	}
	defer in.Number.Wipe()
	defer in.CVV.Wipe()
	return c.withVault(func(v *vault.Vault) int {
		warning, err := cardcheck.Check(c.ctx, v, *org, in.Number, month, year)
		if err != nil {
			return c.fail(err)
		}
		it, err := v.AddCard(c.ctx, *org, *owner, in)
		if err != nil {
			return c.fail(err)
		}
		if err := cardcheck.Record(c.ctx, v, it, in.Number); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.env.Stdout, "added card %s: %s (%s)\n", it.Label, mask(it), it.ID)
		if warning != "" {
			fmt.Fprintf(c.env.Stderr, "warning: %s\n", warning)
		}
		return exitOK
	})
}

func (c *cli) addLogin(args []string) int {
	fs, org := newFlags("add-login")
	owner := fs.String("owner", "owner", "owner")
	site := fs.String("site", "", "registrable domain the login is locked to")
	website := fs.String("website", "", "sign-in URL, for display")
	email := fs.String("email", "", "email address")
	username := fs.String("username", "", "user name")
	pos, ok := c.parse(fs, args)
	if !ok {
		return exitUsage
	}
	if len(pos) > 0 {
		return c.usageErr("add-login takes no arguments (the password is read from stdin)")
	}
	if *site == "" && *website == "" {
		return c.usageErr("--site is required")
	}
	pw, err := c.readSecret("Password: ", false)
	if err != nil {
		return c.fail(err)
	}
	defer wipe(pw)
	totp, err := c.readSecret("TOTP seed (empty for none): ", true)
	if err != nil {
		return c.fail(err)
	}
	defer wipe(totp)
	in := vault.LoginInput{Site: *site, Website: *website, Email: *email, Username: *username,
		Password: vault.NewSecret(pw), TOTP: vault.NewSecret(totp)}
	defer in.Password.Wipe()
	defer in.TOTP.Wipe()
	return c.addItem(func(v *vault.Vault) (vault.Item, error) { return v.AddLogin(c.ctx, *org, *owner, in) })
}

func (c *cli) addIdentity(args []string) int {
	fs, org := newFlags("add-identity")
	owner := fs.String("owner", "owner", "owner")
	var in vault.IdentityMeta
	fs.StringVar(&in.Name, "name", "", "full name")
	fs.StringVar(&in.Email, "email", "", "email address")
	fs.StringVar(&in.Phone, "phone", "", "phone number")
	if pos, ok := c.parse(fs, args); !ok || len(pos) > 0 {
		return c.usageErr("add-identity takes only flags")
	}
	return c.addItem(func(v *vault.Vault) (vault.Item, error) { return v.AddIdentity(c.ctx, *org, *owner, in) })
}

func (c *cli) addAddress(args []string) int {
	fs, org := newFlags("add-address")
	owner := fs.String("owner", "owner", "owner")
	var in vault.AddressMeta
	fs.StringVar(&in.Name, "name", "", "recipient name")
	fs.StringVar(&in.Line1, "line1", "", "street and number")
	fs.StringVar(&in.Line2, "line2", "", "second line")
	fs.StringVar(&in.City, "city", "", "city")
	fs.StringVar(&in.Region, "region", "", "region or state")
	fs.StringVar(&in.PostalCode, "postal-code", "", "postal code")
	fs.StringVar(&in.Country, "country", "", "ISO 3166-1 alpha-2 country code")
	if pos, ok := c.parse(fs, args); !ok || len(pos) > 0 {
		return c.usageErr("add-address takes only flags")
	}
	in.Country = strings.ToUpper(in.Country)
	return c.addItem(func(v *vault.Vault) (vault.Item, error) { return v.AddAddress(c.ctx, *org, *owner, in) })
}

// addItem adds one item with add and says what it added: its kind and
// label (a login's masked handle too) and its id.
func (c *cli) addItem(add func(v *vault.Vault) (vault.Item, error)) int {
	return c.withVault(func(v *vault.Vault) int {
		it, err := add(v)
		if err != nil {
			return c.fail(err)
		}
		what := it.Label
		if it.Kind == vault.KindLogin {
			what += ": " + mask(it)
		}
		fmt.Fprintf(c.env.Stdout, "added %s %s (%s)\n", it.Kind, what, it.ID)
		return exitOK
	})
}

const (
	bullets4 = "••••"
	pwMask   = "••••••••"
)

// mask is the one-line, secret-free summary of an item.
func mask(it vault.Item) string {
	switch {
	case it.Card != nil:
		return fmt.Sprintf("%s %s %s  exp %02d/%d", it.Card.Brand, bullets4, it.Card.Last4, it.Card.ExpiryMonth, it.Card.ExpiryYear)
	case it.Login != nil:
		who := it.Login.Email
		if who == "" {
			who = it.Login.Username
		}
		return fmt.Sprintf("%s  %s  password %s", it.Login.Site, who, pwMask)
	case it.Identity != nil:
		return it.Identity.Name
	case it.Address != nil:
		return fmt.Sprintf("%s, %s", it.Address.City, it.Address.Country)
	}
	return ""
}

func (c *cli) list(args []string) int {
	fs, org := newFlags("list")
	asJSON := fs.Bool("json", false, "print JSON (stable field names): every item's metadata, never a secret")
	if pos, ok := c.parse(fs, args); !ok || len(pos) > 0 {
		return c.usageErr("list takes only --org and --json")
	}
	return c.withVault(func(v *vault.Vault) int {
		items, err := v.List(c.ctx, *org)
		if err != nil {
			return c.fail(err)
		}
		if *asJSON {
			out := []itemJSON{}
			for _, it := range items {
				out = append(out, itemOf(it))
			}
			return c.printJSON(out)
		}
		if len(items) == 0 {
			fmt.Fprintln(c.env.Stdout, "no items")
		}
		for _, it := range items {
			fmt.Fprintf(c.env.Stdout, "%-8s %-10s %s  %s\n", it.Kind, it.Label, it.ID, mask(it))
		}
		return exitOK
	})
}

// lookup resolves "<item-id>" or "<kind> <label>".
func (c *cli) lookup(v *vault.Vault, org string, pos []string) (vault.Item, error) {
	if len(pos) == 1 {
		return v.Get(c.ctx, org, pos[0])
	}
	return v.GetByLabel(c.ctx, org, vault.Kind(pos[0]), pos[1])
}

func (c *cli) show(args []string) int {
	fs, org := newFlags("show")
	asJSON := fs.Bool("json", false, "print JSON (the same fields as list --json)")
	pos, ok := c.parse(fs, args)
	if !ok || len(pos) < 1 || len(pos) > 2 {
		return c.usageErr("show <item-id> | <kind> <label>")
	}
	return c.withVault(func(v *vault.Vault) int {
		it, err := c.lookup(v, *org, pos)
		if err != nil {
			return c.fail(err)
		}
		if *asJSON {
			return c.printJSON(itemOf(it))
		}
		w := c.env.Stdout
		line := func(k, v string) {
			if v != "" {
				fmt.Fprintf(w, "%-12s %s\n", k+":", v)
			}
		}
		line("id", it.ID)
		line("kind", string(it.Kind))
		line("label", it.Label)
		line("owner", it.Owner)
		line("created", it.Created.Format("2006-01-02 15:04:05Z"))
		switch {
		case it.Card != nil:
			cm := it.Card
			line("number", fmt.Sprintf("%s %s %s", cm.Brand, bullets4, cm.Last4))
			if it.Has(vault.FieldCVV) {
				line("cvv", strings.Repeat("•", cm.CVVLen))
			} else {
				line("cvv", "entered live per purchase")
			}
			line("expiry", fmt.Sprintf("%02d/%d", cm.ExpiryMonth, cm.ExpiryYear))
			line("holder", cm.HolderName)
			if cm.AnySite {
				line("sites", "any authorized site")
			} else {
				line("sites", strings.Join(cm.Sites, ", "))
			}
		case it.Login != nil:
			lm := it.Login
			line("site", lm.Site)
			line("website", lm.Website)
			line("email", lm.Email)
			line("username", lm.Username)
			line("password", pwMask)
			if lm.HasTOTP {
				line("totp", totpSummary(lm))
			}
		case it.Identity != nil:
			line("name", it.Identity.Name)
			line("email", it.Identity.Email)
			line("phone", it.Identity.Phone)
		case it.Address != nil:
			a := it.Address
			line("name", a.Name)
			line("line1", a.Line1)
			line("line2", a.Line2)
			line("city", a.City)
			line("region", a.Region)
			line("postal code", a.PostalCode)
			line("country", a.Country)
		}
		return exitOK
	})
}

// totpSummary says a seed is set and with which settings; the seed itself
// never leaves the vault (P23).
func totpSummary(lm *vault.LoginMeta) string {
	alg, digits, period := lm.TOTPAlgorithm, lm.TOTPDigits, lm.TOTPPeriod
	if alg == "" {
		alg = vault.TOTPDefaultAlgorithm
	}
	if digits == 0 {
		digits = vault.TOTPDefaultDigits
	}
	if period == 0 {
		period = vault.TOTPDefaultPeriod
	}
	return fmt.Sprintf("set (%s, %d digits, %d s)", alg, digits, period)
}

func (c *cli) remove(args []string) int {
	fs, org := newFlags("remove")
	pos, ok := c.parse(fs, args)
	if !ok || len(pos) < 1 || len(pos) > 2 {
		return c.usageErr("remove <item-id> | <kind> <label>")
	}
	return c.withVault(func(v *vault.Vault) int {
		it, err := c.lookup(v, *org, pos)
		if err != nil {
			return c.fail(err)
		}
		if err := v.Remove(c.ctx, *org, it.ID); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.env.Stdout, "removed %s %s (%s)\n", it.Kind, it.Label, it.ID)
		return exitOK
	})
}

// rotateKey keeps the old key as <file>.old until the store is re-wrapped,
// so a crash at any point leaves a key set that opens the vault (OpenStore
// finishes an interrupted rotation).
func (c *cli) rotateKey(args []string) int {
	fs, _ := newFlags("rotate-key")
	if pos, ok := c.parse(fs, args); !ok || len(pos) > 0 {
		return c.usageErr("rotate-key takes no arguments")
	}
	if c.env.KeyFile == "" {
		return c.fail(agentvault.Errorf(agentvault.CodeInvalidInput, "rotate-key needs a master key file (the key comes from elsewhere)"))
	}
	return c.withVault(func(v *vault.Vault) int {
		oldKey, err := vault.ReadKeyFile(c.env.KeyFile)
		if err != nil {
			return c.fail(err)
		}
		defer wipe(oldKey)
		oldID := v.ActiveKeyID()
		if vault.KeyIDFor(oldKey) != oldID {
			return c.fail(agentvault.Errorf(agentvault.CodeConflict, "the key file does not hold the vault's active key; open the vault once to finish a pending rotation"))
		}
		newKey := make([]byte, 32)
		if _, err := rand.Read(newKey); err != nil {
			return c.fail(agentvault.Wrap(agentvault.CodeInternal, err, "no randomness"))
		}
		defer wipe(newKey)
		oldPath := c.env.KeyFile + ".old"
		if err := vault.WriteKeyFile(oldPath, oldKey); err != nil {
			return c.fail(err)
		}
		if err := vault.WriteKeyFile(c.env.KeyFile, newKey); err != nil {
			os.Remove(oldPath)
			return c.fail(err)
		}
		if err := v.RotateKey(c.ctx, newKey, ""); err != nil {
			// Keep whichever key file the store now needs; when that is
			// unknown, keep both so the next open finishes the rotation.
			switch id, serr := v.StoredActiveKeyID(c.ctx); {
			case serr == nil && id == oldID:
				if rerr := vault.WriteKeyFile(c.env.KeyFile, oldKey); rerr == nil {
					os.Remove(oldPath)
				}
			case serr == nil && id == vault.KeyIDFor(newKey):
				os.Remove(oldPath)
			default:
				fmt.Fprintf(c.env.Stderr, "rotation state unknown: keeping %s and %s; the next open of the vault finishes the rotation\n",
					filepath.Base(c.env.KeyFile), filepath.Base(oldPath))
			}
			return c.fail(err)
		}
		if err := os.Remove(oldPath); err != nil {
			fmt.Fprintf(c.env.Stderr, "warning: could not remove %s; delete it by hand\n", filepath.Base(oldPath))
		}
		fmt.Fprintf(c.env.Stdout, "rotated master key %s -> %s\n", oldID, v.ActiveKeyID())
		return exitOK
	})
}

// commands is every command by name.
func (c *cli) commands() map[string]func([]string) int {
	return map[string]func([]string) int{
		"add-card": c.addCard, "add-login": c.addLogin, "add-identity": c.addIdentity, "add-address": c.addAddress,
		"list": c.list, "show": c.show, "remove": c.remove, "rotate-key": c.rotateKey,
	}
}

// Commands lists the command names, for the test that holds them against
// package authz's table of who may do what.
func Commands() []string {
	var out []string
	for n := range (&cli{}).commands() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
