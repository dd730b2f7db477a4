package proxyd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownercli"
	"github.com/agentvault/agentvault/vault"
)

const usage = `usage: proxyd <command> [flags]

commands:
  run       [--proxy ADDR] [--control ADDR] [--control-tls] [--admin ADDR] [--dashboard ADDR]
            [--credentials ADDR] [--unsafe-allow-private-ranges]
                                                 serve until SIGINT/SIGTERM (SIGHUP reloads the config)
  vault     <vault command> ...                  the owner's vault CLI (proxyd vault help)
  owner     <owner command> ...                  API keys, sites, approvals, cards, dashboard password (proxyd owner help)
  session   create [--api-key-file FILE] [--control URL (default: the config's listen.control)]
            opens a browser session and prints its proxy credential and CA path for curl
            (an https:// control URL is verified against <data>/ca.pem)
  ca        export                               prints the MITM CA certificate (PEM)
  botauth   <botauth command> ...                the agent's signed identity: sites, Visa TAP, key rotation (proxyd botauth help)
  doctor                                         checks this deployment and prints what to fix
  data-dir                                       prints the data directory the other commands use
  addresses [--json] [run's flags]               prints where every listener is (proxyd's and mcpd's)
  mcp-config [--stdio | --http] [--client claude-desktop|claude-code|cursor|vscode]
                                                 prints an MCP client's config for this deployment

every command takes --data DIR and --config FILE anywhere on its line. The data directory is
--data, then $AGENTVAULT_DATA, then $DATA, then the config file's data_dir, then ~/.agentvault
(mcpd follows the same rule).
The config is --config, then the data directory's proxyd.yaml, then the embedded defaults:
run, doctor, vault, owner and ca all use the store it names (store.driver sqlite or postgres).
vault, owner and ca refuse to create a SQLite vault where none exists unless given --init;
on a Postgres store --init is refused (the replicas' shared store is used as it is).
`

// RunCLI is proxyd's command line; it returns the exit code. --data DIR,
// --config FILE and --init are taken at any position (resolveConfig is the
// rule).
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	common, args, err := peelCommon(args)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", agentvault.ErrorMessage(err))
		return 2
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err := cliAllowed(args); err != nil {
		return fail(stderr, err)
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], common, stdout, stderr)
	case "data-dir":
		return cmdDataDir(args[1:], common, stdout, stderr)
	case "addresses":
		return cmdAddresses(args[1:], common, stdout, stderr)
	case "mcp-config":
		return cmdMCPConfig(args[1:], common, stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, args[1:], common, stdout, stderr)
	case "vault", "owner", "ca", "botauth":
		return runStoreCommand(ctx, args, common, stdout, stderr)
	case "session":
		return cmdSession(ctx, args[1:], common, stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}

// cliCommand is the command's words as package authz names them: "run",
// "owner revoke", "vault add-card", "owner notify show"; "" for help and
// for words no command has (the command's own parser says what is wrong
// with those).
func cliCommand(args []string) string {
	switch args[0] {
	case "vault", "owner", "ca", "session", "botauth":
		if len(args) < 2 || args[1] == "help" || args[1] == "-h" || args[1] == "--help" || strings.HasPrefix(args[1], "-") {
			return ""
		}
		words := args[0] + " " + args[1]
		if len(args) > 2 && !strings.HasPrefix(args[2], "-") && cliKnown(words+" "+args[2]) {
			return words + " " + args[2]
		}
		return words
	}
	return args[0]
}

// cliAllowed asks authz whether the shell may run the command (P24). A
// command that exists but has no rule in authz's table is refused; words
// that name no command are left to the command's parser.
func cliAllowed(args []string) error {
	words := cliCommand(args)
	if words == "" {
		return nil
	}
	if _, ok := authz.Lookup(authz.CLI, words); !ok && !cliKnown(words) {
		return nil
	}
	return authz.Check(authz.ShellOwner, authz.CLI, words)
}

// cliKnown reports whether words name a command proxyd has.
func cliKnown(words string) bool {
	return slices.Contains(CLICommands(), words)
}

// CLICommands lists every command proxyd's CLI has, as authz names them.
func CLICommands() []string {
	out := []string{"run", "data-dir", "addresses", "mcp-config", "doctor", "session create", "ca export"}
	for _, c := range vaultcli.Commands() {
		out = append(out, "vault "+c)
	}
	for _, c := range ownercli.Commands() {
		out = append(out, "owner "+c)
	}
	for _, c := range botAuthCommands {
		out = append(out, "botauth "+c)
	}
	return out
}

// runStoreCommand is the one dispatch of every command that reads or
// writes the owner's or the vault's state (vault ..., owner ..., ca
// export): each runs over the store the deployment's config names
// (resolveConfig), opened once through openStore like `proxyd run` opens
// it, and closed when the command returns.
func runStoreCommand(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	group, sub := args[0], ""
	if len(args) > 1 {
		sub = args[1]
	}
	s := &cliStore{}
	defer s.close()
	if sub != "" && sub != "help" && sub != "-h" && sub != "--help" {
		cc, err := resolveConfig(common)
		if err != nil {
			return fail(stderr, err)
		}
		s.cfg = cc.Config
		if err := requireVault(ctx, cc, s, common.init, group != "owner"); err != nil {
			return fail(stderr, err)
		}
	}
	switch group {
	case "vault":
		code := vaultcli.Run(ctx, args[1:], vaultcli.DefaultEnv(s.cfg.DataDir, s.openVault, stdout, stderr))
		if code == 0 && sub == "rotate-key" && s.cfg.Store.Driver == "postgres" {
			fmt.Fprintf(stderr, "the store is shared: copy %s to every other replica's data directory now (mode 0600); until a replica has it, it cannot open the vault's items and its releases fail closed\n",
				filepath.Join(s.cfg.DataDir, vaultcli.KeyFileName))
		}
		return code
	case "owner":
		env := ownercli.DefaultEnv(s.openOwner, s.items, stdout, stderr)
		env.UpdateCard = s.updateCard
		env.Notify = cliNotifications{cfg: s.cfg}
		return ownercli.Run(ctx, args[1:], env)
	case "botauth":
		return cmdBotAuth(ctx, args[1:], s, stdout, stderr)
	default:
		return cmdCA(ctx, args[1:], s, stdout, stderr)
	}
}

// cliStore is one CLI command's store: opened on first use by openStore
// (the daemon's code path), shared by the vault and the owner service,
// closed once when the command ends (one handle per process, P22).
type cliStore struct {
	cfg Config
	st  appStore
	v   *vault.Vault
}

// cliOpenTimeout bounds connecting to (and migrating) the store for one
// command: an unreachable Postgres fails the command instead of hanging.
const cliOpenTimeout = 30 * time.Second

func (s *cliStore) store(ctx context.Context) (appStore, error) {
	if s.st == nil {
		ctx, cancel := context.WithTimeout(ctx, cliOpenTimeout)
		defer cancel()
		st, err := openStore(ctx, s.cfg)
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	return s.st, nil
}

func (s *cliStore) vault(ctx context.Context) (*vault.Vault, error) {
	if s.v == nil {
		st, err := s.store(ctx)
		if err != nil {
			return nil, err
		}
		if s.v, err = vaultcli.OpenStore(ctx, s.cfg.DataDir, st); err != nil {
			return nil, err
		}
	}
	return s.v, nil
}

func (s *cliStore) close() {
	if s.st != nil {
		_ = s.st.Close()
	}
}

// openVault and openOwner are the CLIs' Env.Open: the store stays open
// until the command ends, so their close is a no-op.
func (s *cliStore) openVault(ctx context.Context) (*vault.Vault, func() error, error) {
	v, err := s.vault(ctx)
	return v, func() error { return nil }, err
}

func (s *cliStore) openOwner(ctx context.Context) (*owner.Service, func() error, error) {
	st, err := s.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	svc, err := owner.New(owner.Config{Store: st, Org: DefaultOrg})
	return svc, func() error { return nil }, err
}

// items lists the vault's items for the owner CLI (to name a card), only
// where the data directory holds the master key: naming items never
// creates one.
func (s *cliStore) items(ctx context.Context) ([]vault.Item, error) {
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, vaultcli.KeyFileName)); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeNotFound, err, "no master key in %s to read the vault's items with", s.cfg.DataDir)
	}
	v, err := s.vault(ctx)
	if err != nil {
		return nil, err
	}
	return v.List(ctx, DefaultOrg)
}

// updateCard changes a card's sites for the owner CLI (set-card, apply),
// audited by the vault like the dashboard's change.
func (s *cliStore) updateCard(ctx context.Context, id string, u vault.CardUpdate) (vault.Item, error) {
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, vaultcli.KeyFileName)); err != nil {
		return vault.Item{}, agentvault.Wrap(agentvault.CodeNotFound, err, "no master key in %s to change the card with", s.cfg.DataDir)
	}
	v, err := s.vault(ctx)
	if err != nil {
		return vault.Item{}, err
	}
	return v.UpdateCard(ctx, DefaultOrg, id, u)
}

// parseFlags parses a command's flags: -h prints them on stdout and
// returns flag.ErrHelp; an unknown flag is an error on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return flag.ErrHelp
		}
	}
	fs.SetOutput(stderr)
	return fs.Parse(args)
}

// helpOr2 is a flag error's exit code: 0 after -h, else 2.
func helpOr2(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "error: %s\n", agentvault.ErrorMessage(err))
	return 1
}

// runFlags are `proxyd run`'s own flags (--data, --config and --init are
// common).
type runFlags struct {
	proxy, control, admin, dashboard, credentials string
	unsafePrivate, controlTLS                     bool
	// set names the address flags given ("dashboard": even an empty
	// value turns that listener off).
	set map[string]bool
}

func parseRunFlags(args []string, stdout, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.proxy, "proxy", "", "proxy listen address (overrides listen.proxy)")
	fs.StringVar(&f.control, "control", "", "control API listen address, loopback only unless --control-tls")
	fs.BoolVar(&f.controlTLS, "control-tls", false, "serve the control API over TLS with a leaf of the deployment's CA (sets listen.control_tls)")
	fs.StringVar(&f.admin, "admin", "", "admin listen address (/metrics, /healthz), loopback only")
	fs.StringVar(&f.dashboard, "dashboard", "", "the owner's dashboard listen address (overrides listen.dashboard; empty turns it off)")
	fs.StringVar(&f.credentials, "credentials", "", "the credential-use listener, loopback only (overrides listen.credentials; off by default)")
	fs.BoolVar(&f.unsafePrivate, "unsafe-allow-private-ranges", false, "let the proxy reach loopback and private addresses (tests only)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "flags (run, doctor, data-dir and addresses take them, and --data DIR, --config FILE anywhere):")
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(stdout)
			fs.Usage()
			return f, flag.ErrHelp
		}
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "error: unexpected argument %q\n", fs.Arg(0))
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// runConfig is the config `proxyd run` (and doctor) would use: the config
// by the one rule (resolveConfig), the flags over it.
// runConfigFrom reads run's flags from args and the configuration they
// choose, for every command that takes them; when it cannot, it has said
// why and ok is false, with the exit code (2 for a usage error).
func runConfigFrom(args []string, common commonFlags, stdout, stderr io.Writer) (cc configChoice, code int, ok bool) {
	f, err := parseRunFlags(args, stdout, stderr)
	if err != nil {
		return cc, helpOr2(err), false
	}
	if cc, err = runConfig(f, common); err != nil {
		return cc, fail(stderr, err), false
	}
	return cc, 0, true
}

func runConfig(f runFlags, common commonFlags) (configChoice, error) {
	cc, err := resolveConfig(common)
	if err != nil {
		return cc, err
	}
	c := &cc.Config
	for _, o := range []struct {
		v   string
		dst *string
	}{{f.proxy, &c.Listen.Proxy}, {f.control, &c.Listen.Control}, {f.admin, &c.Listen.Admin}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if f.set["dashboard"] {
		c.Listen.Dashboard = f.dashboard
	}
	if f.set["credentials"] {
		c.Listen.Credentials = f.credentials
	}
	if f.unsafePrivate {
		c.UnsafeAllowPrivateRanges = true
	}
	if f.controlTLS {
		c.Listen.ControlTLS = true
	}
	return cc, c.Validate()
}

func cmdRun(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	cc, code, ok := runConfigFrom(args, common, stdout, stderr)
	if !ok {
		return code
	}
	m := NewMain()
	m.Stderr = stderr
	m.Config = cc.Config
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Open(ctx); err != nil {
		return fail(stderr, err)
	}
	if cc.Path != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				_ = m.Reload(cc.Path)
			}
		}()
	}
	if err := m.Run(ctx); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// cmdDataDir prints the data directory `proxyd run` with the same flags
// would use (scripts/run.sh asks it rather than guessing).
func cmdDataDir(args []string, common commonFlags, stdout, stderr io.Writer) int {
	cc, code, ok := runConfigFrom(args, common, stdout, stderr)
	if !ok {
		return code
	}
	fmt.Fprintln(stdout, cc.Data.Dir)
	return 0
}

func cmdSession(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("session create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("api-key-file", "", "file holding the API key (default <data>/api-key)")
	controlURL := fs.String("control", "", "control API base URL (default: the config's listen.control)")
	if err := parseFlags(fs, args[1:], stdout, stderr); err != nil {
		return helpOr2(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: session create takes only flags, not %q\n", fs.Arg(0))
		return 2
	}
	cc, err := resolveConfig(common)
	if err != nil {
		return fail(stderr, err)
	}
	if *controlURL == "" {
		*controlURL = addressesOf(cc).ControlURL
	}
	d := cc.Data
	if *keyFile == "" {
		*keyFile = filepath.Join(d.Dir, APIKeyFile)
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail(stderr, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the API key file %s: %s (data directory %s)",
			*keyFile, vaultcli.Reason(err), d))
	}
	tokPath := filepath.Join(d.Dir, ControlTokenFile)
	tok, err := os.ReadFile(tokPath)
	if err != nil {
		return fail(stderr, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the control token %s: %s (is proxyd running on the data directory %s?)",
			tokPath, vaultcli.Reason(err), d))
	}
	caPath := filepath.Join(d.Dir, CAFile)
	var hc *http.Client
	if strings.HasPrefix(*controlURL, "https://") {
		// listen.control_tls: the leaf is the deployment CA's.
		certs, err := readPEMCerts(caPath)
		if err != nil {
			return fail(stderr, err)
		}
		pool := x509.NewCertPool()
		for _, c := range certs {
			pool.AddCert(c)
		}
		hc = &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	c := control.NewClient(*controlURL, strings.TrimSpace(string(tok)), hc)
	c.UnreachableHint = "start it (make run, or proxyd run), or check --control and the config's listen.control"
	s, err := c.CreateSession(ctx, strings.TrimSpace(string(key)))
	if err != nil {
		return fail(stderr, err)
	}
	scheme, rest, _ := strings.Cut(s.ProxyURL, "://")
	proxy := scheme + "://" + s.ProxyUser + ":" + s.ProxyPassword + "@" + rest
	proxyCA := "" // an https:// proxy with the deployment CA's leaf: the same ca.pem
	if scheme == "https" && cc.Config.Listen.ProxyCertFile == "" {
		proxyCA = " --proxy-cacert " + caPath
	}
	fmt.Fprintf(stdout, "session:  %s\nproxy:    %s\nca:       %s\n\ncurl --proxy '%s'%s --cacert %s https://example.com/\n",
		s.ID, proxy, caPath, proxy, proxyCA, caPath)
	return 0
}

func cmdCA(ctx context.Context, args []string, s *cliStore, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "error: ca export takes no arguments, not %q\n", args[1])
		return 2
	}
	v, err := s.vault(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	ca, err := intercept.LoadOrCreateCA(ctx, v, nil)
	if err != nil {
		return fail(stderr, err)
	}
	_, _ = stdout.Write(ca.CertPEM())
	return 0
}
