package mcpserver

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Main is mcpd's lifecycle: parse flags, Run until the MCP stream ends or
// the context is cancelled, Close. cmd/mcpd is a few lines over it, and e2e
// tests run the same type in-process.
type Main struct {
	ControlURL       string
	ControlTokenFile string
	APIKeyFile       string
	ProxyURL         string
	ChromiumPath     string
	DriverDir        string
	LogLevel         string

	// Stderr receives the logs; stdout is the MCP stream and never sees a
	// log line. Defaults to os.Stderr.
	Stderr io.Writer

	server *Server
}

// NewMain returns a Main with the documented defaults.
func NewMain() *Main {
	home, _ := os.UserHomeDir()
	return &Main{
		ControlURL:       "http://127.0.0.1:7701",
		ControlTokenFile: filepath.Join(home, ".agentvault", "control-token"),
		APIKeyFile:       filepath.Join(home, ".agentvault", "api-key"),
		LogLevel:         "info",
		Stderr:           os.Stderr,
	}
}

// ParseFlags reads the command line; environment variables supply the
// defaults a flag does not override.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("mcpd", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&m.ControlURL, "control-url", envOr("AGENTVAULT_CONTROL_URL", m.ControlURL), "proxyd control API base URL (loopback)")
	fs.StringVar(&m.ControlTokenFile, "control-token-file", envOr("AGENTVAULT_CONTROL_TOKEN_FILE", m.ControlTokenFile), "file holding the control API bearer token")
	fs.StringVar(&m.APIKeyFile, "api-key-file", envOr("AGENTVAULT_API_KEY_FILE", m.APIKeyFile), "file holding the agent API key (AGENTVAULT_API_KEY takes precedence)")
	fs.StringVar(&m.ProxyURL, "proxy", envOr("AGENTVAULT_PROXY_URL", m.ProxyURL), "proxy address override (default: what proxyd announces, http://127.0.0.1:7700)")
	fs.StringVar(&m.ChromiumPath, "chromium", envOr("CHROMIUM_PATH", "/usr/bin/chromium"), "Chromium binary")
	fs.StringVar(&m.DriverDir, "driver-dir", envOr("PLAYWRIGHT_DRIVER_PATH", m.DriverDir), "playwright-core driver directory (holds package/cli.js)")
	fs.StringVar(&m.LogLevel, "log-level", m.LogLevel, "debug, info, warn or error (logs go to stderr)")
	return fs.Parse(args)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the %s file %s", what, path)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "the %s file %s is empty", what, path)
	}
	return v, nil
}

// Open builds the server from the configuration without serving yet.
func (m *Main) Open() error {
	if m.Stderr == nil {
		m.Stderr = os.Stderr
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(m.LogLevel)); err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "log level must be debug, info, warn or error")
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: lvl}))
	token, err := readSecretFile(m.ControlTokenFile, "control token")
	if err != nil {
		return err
	}
	apiKey := os.Getenv("AGENTVAULT_API_KEY")
	if apiKey == "" {
		if apiKey, err = readSecretFile(m.APIKeyFile, "API key"); err != nil {
			return err
		}
	}
	// The control API is loopback: no proxy from the environment applies.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}
	srv, err := New(Config{
		Control:      control.NewClient(m.ControlURL, token, hc),
		APIKey:       apiKey,
		ProxyURL:     m.ProxyURL,
		DriverDir:    m.DriverDir,
		ChromiumPath: m.ChromiumPath,
		Logger:       log,
	})
	if err != nil {
		return err
	}
	srv.Prewarm()
	m.server = srv
	return nil
}

// Run opens the server if needed and serves MCP on stdin/stdout.
func (m *Main) Run(ctx context.Context) error {
	return m.RunTransport(ctx, &mcp.StdioTransport{})
}

// RunTransport serves MCP on t (an in-memory or command transport in
// tests).
func (m *Main) RunTransport(ctx context.Context, t mcp.Transport) error {
	if m.server == nil {
		if err := m.Open(); err != nil {
			return err
		}
	}
	err := m.server.Run(ctx, t)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close ends every session and the browser.
func (m *Main) Close() error {
	if m.server == nil {
		return nil
	}
	return m.server.Close()
}
