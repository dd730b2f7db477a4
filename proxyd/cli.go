package proxyd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner/ownercli"
)

const usage = `usage: proxyd <command> [flags]

commands:
  run       [--config FILE] [--data DIR] [--proxy ADDR] [--control ADDR] [--admin ADDR]
            [--unsafe-allow-private-ranges]      serve until SIGINT/SIGTERM (SIGHUP reloads the config)
  vault     [--data DIR] <vault command> ...     the owner's vault CLI (proxyd vault help)
  owner     [--data DIR] <owner command> ...     API keys, sites, approvals, dashboard password (proxyd owner help)
  session   create [--data DIR] [--api-key-file FILE] [--control URL]
            opens a browser session and prints its proxy credential and CA path for curl
  ca        export [--data DIR]                  prints the MITM CA certificate (PEM)
`

// RunCLI is proxyd's command line; it returns the exit code.
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stderr)
	case "vault":
		dataDir, rest := peelData(args[1:])
		return vaultcli.Run(ctx, rest, vaultcli.DefaultEnv(dataDir))
	case "owner":
		dataDir, rest := peelData(args[1:])
		return ownercli.Run(ctx, rest, ownercli.DefaultEnv(dataDir, DefaultOrg))
	case "session":
		return cmdSession(ctx, args[1:], stdout, stderr)
	case "ca":
		return cmdCA(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}

// peelData takes a leading --data DIR off args, defaulting to the embedded
// data directory.
func peelData(args []string) (string, []string) {
	dir := expandHome(DefaultConfig().DataDir)
	if len(args) >= 2 && (args[0] == "--data" || args[0] == "-data") {
		return expandHome(args[1]), args[2:]
	}
	if len(args) >= 1 && strings.HasPrefix(args[0], "--data=") {
		return expandHome(strings.TrimPrefix(args[0], "--data=")), args[1:]
	}
	return dir, args
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "error: %s\n", agentvault.ErrorMessage(err))
	return 1
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (strict: unknown keys refuse start-up)")
	data := fs.String("data", "", "data directory (overrides data_dir)")
	proxyAddr := fs.String("proxy", "", "proxy listen address (overrides listen.proxy)")
	controlAddr := fs.String("control", "", "control API listen address, loopback only")
	adminAddr := fs.String("admin", "", "admin listen address (/metrics, /healthz), loopback only")
	unsafePrivate := fs.Bool("unsafe-allow-private-ranges", false, "let the proxy reach loopback and private addresses (tests only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	m := NewMain()
	m.Stderr = stderr
	if *configPath != "" {
		c, err := LoadConfig(*configPath)
		if err != nil {
			return fail(stderr, err)
		}
		m.Config = c
	}
	for _, o := range []struct {
		v   string
		dst *string
	}{{*data, &m.Config.DataDir}, {*proxyAddr, &m.Config.Listen.Proxy}, {*controlAddr, &m.Config.Listen.Control}, {*adminAddr, &m.Config.Listen.Admin}} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if *unsafePrivate {
		m.Config.UnsafeAllowPrivateRanges = true
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Open(ctx); err != nil {
		return fail(stderr, err)
	}
	if *configPath != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				_ = m.Reload(*configPath)
			}
		}()
	}
	if err := m.Run(ctx); err != nil {
		return fail(stderr, err)
	}
	return 0
}

func cmdSession(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("session create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", expandHome(DefaultConfig().DataDir), "data directory")
	keyFile := fs.String("api-key-file", "", "file holding the API key (default <data>/api-key)")
	controlURL := fs.String("control", "http://"+DefaultConfig().Listen.Control, "control API base URL")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	dir := expandHome(*data)
	if *keyFile == "" {
		*keyFile = filepath.Join(dir, APIKeyFile)
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return fail(stderr, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the API key file"))
	}
	tok, err := os.ReadFile(filepath.Join(dir, ControlTokenFile))
	if err != nil {
		return fail(stderr, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the control token (is proxyd running on this data directory?)"))
	}
	c := control.NewClient(*controlURL, strings.TrimSpace(string(tok)), nil)
	s, err := c.CreateSession(ctx, strings.TrimSpace(string(key)))
	if err != nil {
		return fail(stderr, err)
	}
	caPath := filepath.Join(dir, CAFile)
	proxy := strings.Replace(s.ProxyURL, "http://", "http://"+s.ProxyUser+":"+s.ProxyPassword+"@", 1)
	fmt.Fprintf(stdout, "session:  %s\nproxy:    %s\nca:       %s\n\ncurl --proxy '%s' --cacert %s https://example.com/\n",
		s.ID, proxy, caPath, proxy, caPath)
	return 0
}

func cmdCA(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	dir, _ := peelData(args[1:])
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
