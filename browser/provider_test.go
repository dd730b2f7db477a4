package browser

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault"
)

func TestRemoteCheck(t *testing.T) {
	on := true
	for _, tc := range []struct {
		name string
		r    Remote
		want string // "" accepted, else a piece of the message
	}{
		{"local default", Remote{}, ""},
		{"local named", Remote{Provider: ProviderLocal}, ""},
		{"local with endpoint", Remote{Endpoint: "ws://127.0.0.1:1/x"}, "set --browser too"},
		{"unknown", Remote{Provider: "firefox"}, "is not a browser provider"},
		{"playwright loopback ws", Remote{Provider: ProviderPlaywright, Endpoint: "ws://127.0.0.1:9000/abc"}, ""},
		{"playwright no endpoint", Remote{Provider: ProviderPlaywright}, "needs --browser-endpoint"},
		{"playwright http", Remote{Provider: ProviderPlaywright, Endpoint: "http://127.0.0.1:9000"}, "must be ws:// or wss://"},
		{"playwright remote ws in clear", Remote{Provider: ProviderPlaywright, Endpoint: "ws://browsers.example:9000/abc"}, "in clear"},
		{"playwright remote wss", Remote{Provider: ProviderPlaywright, Endpoint: "wss://browsers.example/abc"}, ""},
		{"cdp http loopback", Remote{Provider: ProviderCDP, Endpoint: "http://localhost:9222"}, ""},
		{"cdp browserless wss with token", Remote{Provider: ProviderCDP, Endpoint: "wss://production-sfo.browserless.io?token=x"}, ""},
		{"cdp remote http", Remote{Provider: ProviderCDP, Endpoint: "http://10.0.0.5:9222"}, "in clear"},
		{"cdp with key", Remote{Provider: ProviderCDP, Endpoint: "http://localhost:9222", APIKey: "k"}, "for steel_cloud and browserbase"},
		{"steel", Remote{Provider: ProviderSteel, APIKey: "ste-k"}, ""},
		{"steel no key", Remote{Provider: ProviderSteel}, "STEEL_API_KEY"},
		{"steel project", Remote{Provider: ProviderSteel, APIKey: "k", Project: "p"}, "Browserbase's project"},
		{"steel api in clear", Remote{Provider: ProviderSteel, APIKey: "k", Endpoint: "http://steel.internal:3000"}, "in clear"},
		{"steel self-hosted loopback", Remote{Provider: ProviderSteel, APIKey: "k", Endpoint: "http://127.0.0.1:3000"}, ""},
		{"browserbase ws api", Remote{Provider: ProviderBrowserbase, APIKey: "k", Endpoint: "wss://api.browserbase.com"}, "must be http:// or https://"},
		{"browserbase solver off", Remote{Provider: ProviderBrowserbase, APIKey: "k", Project: "p", SolveCaptcha: new(bool)}, ""},
		{"local solver", Remote{SolveCaptcha: &on}, "set --browser too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want a refusal saying %q", tc.want)
			case tc.want != "" && !strings.Contains(agentvault.ErrorMessage(err), tc.want):
				t.Fatalf("message %q lacks %q", agentvault.ErrorMessage(err), tc.want)
			}
		})
	}
}

// TestSolverDefaults: seed 000's rule, steel_cloud only with solveCaptcha,
// browserbase unless its solver is turned off, nothing else ever.
func TestSolverDefaults(t *testing.T) {
	off, on := false, true
	for _, tc := range []struct {
		r    Remote
		want bool
	}{
		{Remote{}, false},
		{Remote{Provider: ProviderCDP}, false},
		{Remote{Provider: ProviderSteel}, false},
		{Remote{Provider: ProviderSteel, SolveCaptcha: &on}, true},
		{Remote{Provider: ProviderBrowserbase}, true},
		{Remote{Provider: ProviderBrowserbase, SolveCaptcha: &off}, false},
	} {
		if got := tc.r.SolverOn(); got != tc.want {
			t.Errorf("%s solve=%v: SolverOn %v, want %v", tc.r.Kind(), tc.r.SolveCaptcha, got, tc.want)
		}
	}
}

// TestP11_ProviderKeyNeverPrinted: the API key prints as REDACTED in every
// form a log line or an error could take.
func TestP11_ProviderKeyNeverPrinted(t *testing.T) {
	const key = "ste-canary-5f1b0c9d7e"
	r := Remote{Provider: ProviderSteel, APIKey: key}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("remote", "key", r.APIKey, "remote", r)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("remote", "key", r.APIKey)
	fmt.Fprintf(&buf, "%v %+v %#v %s %q", r, r, r, r.APIKey, r.APIKey)
	if strings.Contains(buf.String(), key) {
		t.Fatalf("the key was printed: %s", buf.String())
	}
}

// TestManagedRefusesLoopbackProxyForACloud: a managed browser in the
// provider's cloud cannot reach proxyd on 127.0.0.1; mcpd says so before
// it asks the provider for anything (and never sends the proxy credential
// there).
func TestManagedRefusesLoopbackProxyForACloud(t *testing.T) {
	var hits atomic.Int32
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer api.Close()
	a, err := newManagedAPI(Remote{Provider: ProviderSteel, APIKey: "k", Endpoint: "https://steel.example"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.create(context.Background(), createArgs{proxy: &Proxy{Server: "http://127.0.0.1:7700", Username: "s_1", Password: "pw"}, width: 1, height: 1})
	if err == nil || !strings.Contains(agentvault.ErrorMessage(err), "--proxy") {
		t.Fatalf("want the --proxy advice, got %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the provider was asked")
	}
}

// TestManagedErrorsNameNoBody: a provider's error answer may echo what it
// was sent (the proxy credential): mcpd's error names the status and what
// to check, never the body.
func TestManagedErrorsNameNoBody(t *testing.T) {
	const echoed = "proxy-password-canary-93a1"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-BB-API-Key") != "bb-key" {
			t.Errorf("the API key header is %q", r.Header.Get("X-BB-API-Key"))
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"message":"invalid proxy http://u:%s@proxy"}`, echoed)
	}))
	defer api.Close()
	a, err := newManagedAPI(Remote{Provider: ProviderBrowserbase, APIKey: "bb-key", Endpoint: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.create(context.Background(), createArgs{proxy: &Proxy{Server: "http://127.0.0.1:7700", Username: "u", Password: echoed}, width: 1, height: 1})
	if err == nil {
		t.Fatal("accepted a 422")
	}
	if s := err.Error() + agentvault.ErrorMessage(err); strings.Contains(s, echoed) || !strings.Contains(s, "HTTP 422") {
		t.Fatalf("error %q", s)
	}
}
