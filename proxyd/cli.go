package proxyd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner/ownercli"
)

const usage = `usage: proxyd <command> [flags]

commands:
  run       [--config FILE] [--proxy ADDR] [--control ADDR] [--control-tls] [--admin ADDR]
            [--unsafe-allow-private-ranges]      serve until SIGINT/SIGTERM (SIGHUP reloads the config)
  vault     <vault command> ...                  the owner's vault CLI (proxyd vault help)
  owner     <owner command> ...                  API keys, sites, approvals, dashboard password (proxyd owner help)
  session   create [--api-key-file FILE] [--control URL]
            opens a browser session and prints its proxy credential and CA path for curl
            (an https:// control URL is verified against <data>/ca.pem)
  ca        export                               prints the MITM CA certificate (PEM)
  doctor    [--config FILE]                      checks this deployment and prints what to fix
  data-dir  [--config FILE]                      prints the data directory the other commands use

every command takes --data DIR anywhere on its line; without it the data directory is
$AGENTVAULT_DATA, then $DATA, then the config file's data_dir, then ~/.agentvault.
vault, owner and ca refuse to create a vault where none exists unless given --init.
`

// RunCLI is proxyd's command line; it returns the exit code. --data DIR
// and --init are taken at any position (ResolveDataDir is the rule).
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	common, args, err := peelCommon(args)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", agentvault.ErrorMessage(err))
		return 2
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
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
	case "doctor":
		return cmdDoctor(ctx, args[1:], common, stdout, stderr)
	case "vault", "owner", "ca":
		d := ResolveDataDir(common.data, "", nil)
		if len(args) > 1 && args[1] != "help" && args[1] != "-h" && args[1] != "--help" {
			if err := requireVault(d, common.init); err != nil {
				return fail(stderr, err)
			}
		}
		switch args[0] {
		case "vault":
			return vaultcli.Run(ctx, args[1:], vaultcli.DefaultEnv(d.Dir))
		case "owner":
			return ownercli.Run(ctx, args[1:], ownercli.DefaultEnv(d.Dir, DefaultOrg))
		default:
			return cmdCA(ctx, args[1:], d.Dir, stdout, stderr)
		}
	case "session":
		return cmdSession(ctx, args[1:], common, stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}

// cliCommand is the command's words as package authz names them: "run",
// "owner revoke", "vault add-card"; "" for help and for words no command
// has (the command's own parser says what is wrong with those).
func cliCommand(args []string) string {
	switch args[0] {
	case "vault", "owner", "ca", "session":
		if len(args) < 2 || args[1] == "help" || args[1] == "-h" || args[1] == "--help" || strings.HasPrefix(args[1], "-") {
			return ""
		}
		return args[0] + " " + args[1]
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
	out := []string{"run", "data-dir", "doctor", "session create", "ca export"}
	for _, c := range vaultcli.Commands() {
		out = append(out, "vault "+c)
	}
	for _, c := range ownercli.Commands() {
		out = append(out, "owner "+c)
	}
	return out
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "error: %s\n", agentvault.ErrorMessage(err))
	return 1
}

// runFlags are `proxyd run`'s own flags (--data and --init are common).
type runFlags struct {
	config, proxy, control, admin string
	unsafePrivate, controlTLS     bool
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "YAML config file (strict: unknown keys refuse start-up)")
	fs.StringVar(&f.proxy, "proxy", "", "proxy listen address (overrides listen.proxy)")
	fs.StringVar(&f.control, "control", "", "control API listen address, loopback only unless --control-tls")
	fs.BoolVar(&f.controlTLS, "control-tls", false, "serve the control API over TLS with a leaf of the deployment's CA (sets listen.control_tls)")
	fs.StringVar(&f.admin, "admin", "", "admin listen address (/metrics, /healthz), loopback only")
	fs.BoolVar(&f.unsafePrivate, "unsafe-allow-private-ranges", false, "let the proxy reach loopback and private addresses (tests only)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() != 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, nil
}

// runConfig is the config `proxyd run` (and doctor) would use: the file or
// the embedded defaults, the flags over it, the data directory by the one
// rule.
func runConfig(f runFlags, common commonFlags) (Config, DataDirChoice, error) {
	c := DefaultConfig()
	cfgData := ""
	if f.config != "" {
		var err error
		if c, err = LoadConfig(f.config); err != nil {
			return c, DataDirChoice{}, err
		}
		cfgData = c.DataDir
	}
	d := ResolveDataDir(common.data, cfgData, nil)
	c.DataDir = d.Dir
	for _, o := range []struct {
		v   string
		dst *string
	}{{f.proxy, &c.Listen.Proxy}, {f.control, &c.Listen.Control}, {f.admin, &c.Listen.Admin}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if f.unsafePrivate {
		c.UnsafeAllowPrivateRanges = true
	}
	if f.controlTLS {
		c.Listen.ControlTLS = true
	}
	return c, d, c.Validate()
}

func cmdRun(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return 2
	}
	cfg, _, err := runConfig(f, common)
	if err != nil {
		return fail(stderr, err)
	}
	m := NewMain()
	m.Stderr = stderr
	m.Config = cfg
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Open(ctx); err != nil {
		return fail(stderr, err)
	}
	if f.config != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				_ = m.Reload(f.config)
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
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return 2
	}
	_, d, err := runConfig(f, common)
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintln(stdout, d.Dir)
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
	controlURL := fs.String("control", "http://"+DefaultConfig().Listen.Control, "control API base URL")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	d := ResolveDataDir(common.data, "", nil)
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
	s, err := c.CreateSession(ctx, strings.TrimSpace(string(key)))
	if err != nil {
		return fail(stderr, err)
	}
	proxy := strings.Replace(s.ProxyURL, "http://", "http://"+s.ProxyUser+":"+s.ProxyPassword+"@", 1)
	fmt.Fprintf(stdout, "session:  %s\nproxy:    %s\nca:       %s\n\ncurl --proxy '%s' --cacert %s https://example.com/\n",
		s.ID, proxy, caPath, proxy, caPath)
	return 0
}

func cmdCA(ctx context.Context, args []string, dir string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	v, closeVault, err := vaultcli.OpenDefault(dir)
	if err != nil {
		return fail(stderr, err)
	}
	defer closeVault()
	ca, err := intercept.LoadOrCreateCA(ctx, v, nil)
	if err != nil {
		return fail(stderr, err)
	}
	_, _ = stdout.Write(ca.CertPEM())
	return 0
}
