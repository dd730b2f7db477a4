package proxyd

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/deploy"
)

// addresses is where every listener of the deployment is, as `proxyd run`
// with the same flags and config listens and as mcpd reads it (package
// deploy): one source for scripts/run.sh's banner, its health checks and
// mcpd's flags.
type addresses struct {
	DataDir     string `json:"dataDir"`
	Config      string `json:"config"` // "" for the embedded defaults
	Proxy       string `json:"proxy"`
	ControlURL  string `json:"controlURL"`
	Admin       string `json:"admin"`
	Dashboard   string `json:"dashboard"`   // "" when off
	Credentials string `json:"credentials"` // "" when off
	MCP         string `json:"mcp"`
	MCPMetrics  string `json:"mcpMetrics"` // "" when off
}

func addressesOf(cc configChoice) addresses {
	l := cc.Config.Listen
	a := addresses{DataDir: cc.Data.Dir, Config: cc.Path, Proxy: l.Proxy, ControlURL: "http://" + l.Control,
		Admin: l.Admin, Dashboard: l.Dashboard, Credentials: l.Credentials, MCP: l.MCP, MCPMetrics: l.MCPMetrics}
	if l.ControlTLS {
		host, port, _ := net.SplitHostPort(l.Control)
		if names := controlCertNames(l); len(names) > 0 && (host == "" || net.ParseIP(host).IsUnspecified()) {
			host = names[0]
		}
		a.ControlURL = "https://" + net.JoinHostPort(host, port)
	}
	return a
}

// cmdAddresses prints where every listener is: "name value" lines (a
// listener that is off says "off"), or JSON with --json.
func cmdAddresses(args []string, common commonFlags, stdout, stderr io.Writer) int {
	rest, asJSON := takeJSONFlag(args)
	cc, code, ok := runConfigFrom(rest, common, stdout, stderr)
	if !ok {
		return code
	}
	a := addressesOf(cc)
	if asJSON {
		return printJSON(stdout, stderr, a)
	}
	off := func(s string) string {
		if s == "" {
			return "off"
		}
		return s
	}
	fmt.Fprintf(stdout, "data_dir %s\nconfig %s\nproxy %s\ncontrol %s\nadmin %s\ndashboard %s\ncredentials %s\nmcp %s\nmcp_metrics %s\n",
		a.DataDir, off(a.Config), a.Proxy, a.ControlURL, a.Admin, off(a.Dashboard), off(a.Credentials), a.MCP, off(a.MCPMetrics))
	return 0
}

// takeJSONFlag removes --json (or -json, -o json, --output=json) from args.
func takeJSONFlag(args []string) ([]string, bool) {
	var rest []string
	on := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--json" || a == "-json" || a == "--output=json" || a == "-o=json":
			on = true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json":
			on = true
			i++
		default:
			rest = append(rest, a)
		}
	}
	return rest, on
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(stderr, agentvault.Wrap(agentvault.CodeInternal, err, "cannot write JSON"))
	}
	return 0
}

// mcpClients are the clients `proxyd mcp-config --client` knows, with the
// file each reads its servers from.
var mcpClients = map[string]string{
	"claude-desktop": "claude_desktop_config.json (Settings → Developer → Edit Config)",
	"claude-code":    ".mcp.json in the project (or: claude mcp add-json agentvault '<the agentvault object>')",
	"cursor":         ".cursor/mcp.json in the project, or ~/.cursor/mcp.json",
	"vscode":         ".vscode/mcp.json in the workspace",
}

// cmdMCPConfig prints a client config that runs (--stdio, the default) or
// reaches (--http: the endpoint `make run` serves, listen.mcp) this
// deployment's mcpd, with real paths: the mcpd beside this proxyd, the data
// directory, the API key file and the playwright driver. Each path it
// names exists, or it says what is missing.
func cmdMCPConfig(args []string, common commonFlags, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	useHTTP := fs.Bool("http", false, "the streamable HTTP endpoint of a running `mcpd --http` (make run)")
	useStdio := fs.Bool("stdio", false, "a command the client starts itself (the default)")
	client := fs.String("client", "claude-code", "claude-desktop, claude-code, cursor or vscode")
	keyFile := fs.String("api-key-file", "", "the agent's API key file (default <data>/api-key)")
	mcpdPath := fs.String("mcpd", "", "the mcpd binary (default: the one beside this proxyd)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: proxyd mcp-config [--stdio | --http] [--client claude-desktop|claude-code|cursor|vscode] [--api-key-file FILE] [--mcpd PATH]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return helpOr2(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: mcp-config takes only flags, not %q\n", fs.Arg(0))
		return 2
	}
	if *useHTTP && *useStdio {
		fmt.Fprintln(stderr, "error: give --stdio or --http, not both")
		return 2
	}
	where, ok := mcpClients[*client]
	if !ok {
		names := make([]string, 0, len(mcpClients))
		for n := range mcpClients {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(stderr, "error: unknown client %q; one of %s\n", *client, strings.Join(names, ", "))
		return 2
	}
	cc, err := resolveConfig(common)
	if err != nil {
		return fail(stderr, err)
	}
	a := addressesOf(cc)
	var server map[string]any
	if *useHTTP {
		if *client == "claude-desktop" {
			fmt.Fprintln(stderr, "error: Claude Desktop's config file starts its servers itself: use --stdio (or add http://"+a.MCP+"/mcp as a custom connector in its settings)")
			return 2
		}
		url := "http://" + a.MCP + "/mcp"
		server = map[string]any{"type": "http", "url": url}
		if *client == "cursor" {
			server = map[string]any{"url": url}
		}
	} else {
		server, err = stdioServer(cc, *keyFile, *mcpdPath)
		if err != nil {
			return fail(stderr, err)
		}
		if *client == "vscode" {
			server["type"] = "stdio"
		}
	}
	top := "mcpServers"
	if *client == "vscode" {
		top = "servers"
	}
	if code := printJSON(stdout, stderr, map[string]any{top: map[string]any{"agentvault": server}}); code != 0 {
		return code
	}
	fmt.Fprintf(stderr, "paste into %s\n", where)
	if *useHTTP {
		fmt.Fprintf(stderr, "the endpoint answers while `make run` (or mcpd --http) runs; proxyd and mcpd read %s for it\n", cc.from())
	}
	return 0
}

// stdioServer is the command entry of a client that starts mcpd itself.
func stdioServer(cc configChoice, keyFile, mcpd string) (map[string]any, error) {
	dir := cc.Data.Dir
	if mcpd == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot tell where this proxyd is: pass --mcpd PATH")
		}
		mcpd = filepath.Join(filepath.Dir(exe), "mcpd")
	}
	var err error
	if mcpd, err = filepath.Abs(mcpd); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot make %s absolute", mcpd)
	}
	if st, err := os.Stat(mcpd); err != nil || st.Mode()&0o111 == 0 {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no mcpd binary at %s: build it (make build puts it in bin/ beside proxyd) or pass --mcpd PATH", mcpd)
	}
	if keyFile == "" {
		keyFile = filepath.Join(dir, APIKeyFile)
	}
	if keyFile, err = filepath.Abs(keyFile); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot make %s absolute", keyFile)
	}
	if _, err := os.Stat(keyFile); err != nil {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no API key file at %s: start proxyd once on %s (it creates api-key), or pass --api-key-file with a key from `proxyd owner create-key`", keyFile, cc.Data)
	}
	drv := deploy.FindDriver(nil)
	if !drv.Found {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no playwright driver found (looked in %s): run make driver, or set %s", strings.Join(drv.Tried, ", "), deploy.DriverEnv)
	}
	driver, _ := filepath.Abs(drv.Dir)
	args := []string{"--data", dir}
	if cc.Path != "" && filepath.Dir(cc.Path) != dir {
		p, _ := filepath.Abs(cc.Path)
		args = append(args, "--config", p)
	}
	args = append(args, "--api-key-file", keyFile, "--driver-dir", driver)
	if c := os.Getenv("CHROMIUM_PATH"); c != "" && c != "/usr/bin/chromium" {
		args = append(args, "--chromium", c)
	}
	server := map[string]any{"command": mcpd, "args": args}
	// A client starts mcpd with its own environment, not this shell's:
	// a node elsewhere than where the browser package looks first is named.
	node := os.Getenv("PLAYWRIGHT_NODEJS_PATH")
	if node == "" {
		node, _ = exec.LookPath("node")
	}
	if node != "" && node != "/usr/bin/node" {
		server["env"] = map[string]string{"PLAYWRIGHT_NODEJS_PATH": node}
	}
	return server, nil
}
