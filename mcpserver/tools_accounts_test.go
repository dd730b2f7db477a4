package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// accountControl plays proxyd's account calls: wait answers come from a
// script, one per poll.
type accountControl struct {
	standInControl
	mu      sync.Mutex
	creates []control.CreateLoginIn
	waits   []func() (control.SignupRequestOut, error)
	polls   int
}

func (c *accountControl) CreateLogin(ctx context.Context, in control.CreateLoginIn) (control.SignupRequestOut, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates = append(c.creates, in)
	return control.SignupRequestOut{RequestID: "sr_1", Status: "pending", ExpiresAt: time.Unix(0, 0)}, nil
}

func (c *accountControl) SignupRequest(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	return control.SignupRequestOut{RequestID: in.RequestID, Status: "pending"}, nil
}

func (c *accountControl) WaitSignup(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	c.mu.Lock()
	c.polls++
	var f func() (control.SignupRequestOut, error)
	if len(c.waits) > 0 {
		f, c.waits = c.waits[0], c.waits[1:]
	}
	c.mu.Unlock()
	if f == nil {
		// A long poll that runs out.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(in.TimeoutMs) * time.Millisecond):
		}
		return control.SignupRequestOut{RequestID: in.RequestID, Status: "pending"}, nil
	}
	return f()
}

func (c *accountControl) SetLoginUsername(ctx context.Context, in control.LoginUsernameIn) (control.DoneOut, error) {
	return control.DoneOut{Done: true}, nil
}

func (c *accountControl) RotateLoginPassword(ctx context.Context, in control.LoginRotateIn) (control.DoneOut, error) {
	return control.DoneOut{Done: true}, nil
}

func accountClient(t *testing.T, ctl *accountControl) *mcp.ClientSession {
	t.Helper()
	srv, err := New(Config{Control: ctl, APIKey: "avk_test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); srv.Close() })
	return cs
}

func accountCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r.Content[0].(*mcp.TextContent).Text, r.IsError
}

// Seed 004: the five account tools exist with the seed's parameters, and
// create_login passes the password rules through.
func TestAccountToolsSchemaAndRules(t *testing.T) {
	ctl := &accountControl{}
	cs := accountClient(t, ctl)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"create_login":             {"website", "email", "username", "minLength", "maxLength", "noSymbols", "allowedSymbols", "noTripleRepeat"},
		"get_signup_request":       {"requestId"},
		"wait_for_signup_approval": {"requestId", "timeout"},
		"set_login_username":       {"label", "username"},
		"rotate_login_password":    {"label", "minLength", "maxLength", "noSymbols", "allowedSymbols", "noTripleRepeat"},
	}
	for _, tl := range tools.Tools {
		props, ok := want[tl.Name]
		if !ok {
			continue
		}
		raw, _ := json.Marshal(tl.InputSchema)
		for _, p := range props {
			if !strings.Contains(string(raw), `"`+p+`"`) {
				t.Errorf("%s: no %s in %s", tl.Name, p, raw)
			}
		}
		delete(want, tl.Name)
	}
	if len(want) != 0 {
		t.Fatalf("missing tools: %v", want)
	}
	txt, isErr := accountCall(t, cs, "create_login", map[string]any{"website": "example.com", "email": "a@example.com", "maxLength": 20, "allowedSymbols": "!_"})
	if isErr || !strings.Contains(txt, `"requestId":"sr_1"`) || !strings.Contains(txt, "wait_for_signup_approval") {
		t.Fatalf("create_login: %s", txt)
	}
	if c := ctl.creates[0]; c.MaxLength != 20 || c.AllowedSymbols != "!_" || c.Session == "" {
		t.Fatalf("sent %+v", c)
	}
}

// Seed 004 wait_for_signup_approval: "0 or a negative value is refused
// before the wait starts, with a tool error beginning MCP error -32602".
func TestSeed004_WaitForSignupApprovalTimeoutZeroIsMCPError32602(t *testing.T) {
	ctl := &accountControl{}
	cs := accountClient(t, ctl)
	for _, v := range []int{0, -5} {
		txt, isErr := accountCall(t, cs, "wait_for_signup_approval", map[string]any{"requestId": "sr_1", "timeout": v})
		if !isErr || !strings.HasPrefix(txt, "MCP error -32602") || !strings.Contains(txt, "timeout must be greater than 0") {
			t.Fatalf("timeout %d: %q", v, txt)
		}
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if ctl.polls != 0 {
		t.Fatalf("%d waits started for a refused timeout", ctl.polls)
	}
}

// Seed 004 wait_for_signup_approval: a wait that runs out is still_pending with waitedMs; a failed last poll
// is unknown with its reason; request_not_found ends the wait at once.
func TestSignupWaitOutcomes(t *testing.T) {
	t.Run("still_pending", func(t *testing.T) {
		cs := accountClient(t, &accountControl{})
		txt, isErr := accountCall(t, cs, "wait_for_signup_approval", map[string]any{"requestId": "sr_1", "timeout": 50})
		if isErr || !strings.Contains(txt, `"status":"still_pending"`) || !strings.Contains(txt, `"waitedMs"`) {
			t.Fatalf("%s", txt)
		}
	})
	t.Run("unknown after a failed poll", func(t *testing.T) {
		ctl := &accountControl{waits: []func() (control.SignupRequestOut, error){
			func() (control.SignupRequestOut, error) {
				time.Sleep(60 * time.Millisecond)
				return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeUpstream, "control API unreachable")
			},
		}}
		cs := accountClient(t, ctl)
		txt, isErr := accountCall(t, cs, "wait_for_signup_approval", map[string]any{"requestId": "sr_1", "timeout": 50})
		if isErr || !strings.Contains(txt, `"status":"unknown"`) || !strings.Contains(txt, "upstream_error") {
			t.Fatalf("%s", txt)
		}
	})
	t.Run("approved after a failed poll", func(t *testing.T) {
		ctl := &accountControl{waits: []func() (control.SignupRequestOut, error){
			func() (control.SignupRequestOut, error) {
				return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeRateLimited, "slow down")
			},
			func() (control.SignupRequestOut, error) {
				return control.SignupRequestOut{RequestID: "sr_1", Status: "approved", Login: json.RawMessage(`{"label":"example","site":"example.com","tokens":{"password":"av_login_example_password_abcde"}}`),
					PasswordPolicy: &control.PasswordPolicy{Length: 24, Lowercase: true, Uppercase: true, Digits: true, Symbols: "!"}}, nil
			},
		}}
		cs := accountClient(t, ctl)
		txt, isErr := accountCall(t, cs, "wait_for_signup_approval", map[string]any{"requestId": "sr_1", "timeout": 5000})
		if isErr || !strings.Contains(txt, `"status":"approved"`) || !strings.Contains(txt, `"passwordOwnerManaged":false`) || !strings.Contains(txt, "av_login_example_password") {
			t.Fatalf("%s", txt)
		}
	})
	t.Run("request_not_found ends the wait", func(t *testing.T) {
		ctl := &accountControl{waits: []func() (control.SignupRequestOut, error){
			func() (control.SignupRequestOut, error) {
				return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeRequestNotFound, "no such request")
			},
		}}
		cs := accountClient(t, ctl)
		txt, isErr := accountCall(t, cs, "wait_for_signup_approval", map[string]any{"requestId": "sr_x", "timeout": 45000})
		if !isErr || !strings.Contains(txt, "request_not_found") || ctl.polls != 1 {
			t.Fatalf("%s (polls %d)", txt, ctl.polls)
		}
	})
}
