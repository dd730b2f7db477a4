package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// TestBrowserProviderFlags: --browser and its companions (issue 28), read
// strictly before anything starts; the managed provider's key comes from
// its own variable or a file and is never printed; browser_login waits on
// the provider's solver exactly when the seed says (steel_cloud with
// solveCaptcha, browserbase unless turned off).
func TestBrowserProviderFlags(t *testing.T) {
	const key = "ste-flag-canary-7c1d2e"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		kind     browser.Provider
		solver   bool   // browser_login waits on the provider
		refusal  string // "" accepted
		keyIsSet bool
	}{
		{name: "default local", kind: browser.ProviderLocal},
		{name: "cdp", args: []string{"--browser", "cdp", "--browser-endpoint", "http://127.0.0.1:9222"}, kind: browser.ProviderCDP},
		{name: "env names the browser", env: map[string]string{"AGENTVAULT_BROWSER": "playwright", "AGENTVAULT_BROWSER_ENDPOINT": "ws://127.0.0.1:3000/x"}, kind: browser.ProviderPlaywright},
		{name: "cdp without endpoint", args: []string{"--browser", "cdp"}, refusal: "needs --browser-endpoint"},
		{name: "playwright in clear", args: []string{"--browser", "playwright", "--browser-endpoint", "ws://browsers.example:3000/x"}, refusal: "in clear"},
		{name: "unknown", args: []string{"--browser", "firefox"}, refusal: "not a browser provider"},
		{name: "steel without key", args: []string{"--browser", "steel_cloud"}, refusal: "STEEL_API_KEY"},
		{name: "steel env key, solver off", args: []string{"--browser", "steel_cloud"}, env: map[string]string{"STEEL_API_KEY": key}, kind: browser.ProviderSteel, keyIsSet: true},
		{name: "steel solveCaptcha", args: []string{"--browser", "steel_cloud", "--browser-solve-captcha"}, env: map[string]string{"STEEL_API_KEY": key}, kind: browser.ProviderSteel, solver: true, keyIsSet: true},
		{name: "steel solver from env", args: []string{"--browser", "steel_cloud"}, env: map[string]string{"STEEL_API_KEY": key, "AGENTVAULT_BROWSER_SOLVE_CAPTCHA": "true"}, kind: browser.ProviderSteel, solver: true, keyIsSet: true},
		{name: "browserbase key file, solver on by default", args: []string{"--browser", "browserbase", "--browser-api-key-file", keyFile, "--browser-project", "p1"}, kind: browser.ProviderBrowserbase, solver: true, keyIsSet: true},
		{name: "browserbase solver off", args: []string{"--browser", "browserbase", "--browser-api-key-file", keyFile, "--browser-solve-captcha=false"}, kind: browser.ProviderBrowserbase, keyIsSet: true},
		{name: "key file for a local browser", args: []string{"--browser-api-key-file", keyFile}, refusal: "is for --browser steel_cloud or browserbase"},
		{name: "solver for cdp", args: []string{"--browser", "cdp", "--browser-endpoint", "http://127.0.0.1:9222", "--browser-solve-captcha"}, refusal: "for steel_cloud and browserbase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTVAULT_DATA", t.TempDir())
			for _, k := range []string{"AGENTVAULT_BROWSER", "AGENTVAULT_BROWSER_ENDPOINT", "AGENTVAULT_BROWSER_API_KEY_FILE", "AGENTVAULT_BROWSER_SOLVE_CAPTCHA",
				"STEEL_API_KEY", "BROWSERBASE_API_KEY", "BROWSERBASE_PROJECT_ID"} {
				t.Setenv(k, tc.env[k])
			}
			m := NewMain()
			errs := &syncBuffer{}
			m.Stderr = errs
			err := m.ParseFlags(tc.args)
			if strings.Contains(errs.String(), key) {
				t.Fatal("the API key was printed")
			}
			if tc.refusal != "" {
				if err == nil || !strings.Contains(errs.String(), tc.refusal) {
					t.Fatalf("want a refusal saying %q, got %v; stderr %q", tc.refusal, err, errs.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v (%s)", err, errs.String())
			}
			if m.Browser.Kind() != tc.kind || (m.Browser.APIKey == key) != tc.keyIsSet {
				t.Fatalf("browser %s, key set %v", m.Browser.Kind(), m.Browser.APIKey == key)
			}
			if got := solverFor(m.Browser) != nil; got != tc.solver {
				t.Fatalf("browser_login waits on a solver: %v, want %v", got, tc.solver)
			}
		})
	}
}
