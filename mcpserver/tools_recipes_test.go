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

// fakeRegistry plays proxyd's recipe calls.
type fakeRegistry struct {
	mu       sync.Mutex
	urls     []string
	submits  []control.SubmitRecipeRequest
	polls    int
	block    bool // Recipes waits for the context
	submit   func(req control.SubmitRecipeRequest) (control.RecipeSubmission, error)
	pollWith func(n int) control.RecipeSubmission
}

func (f *fakeRegistry) Recipes(ctx context.Context, pageURL string) (json.RawMessage, error) {
	f.mu.Lock()
	f.urls = append(f.urls, pageURL)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, agentvault.Wrap(agentvault.CodeUpstream, ctx.Err(), "control API unreachable")
	}
	return json.RawMessage(`{"merchant":{"id":"shop.example.com","kind":"merchant"},"platform":null,"signup":null,"signupPlatform":null}`), nil
}

func (f *fakeRegistry) SubmitRecipe(ctx context.Context, req control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
	f.mu.Lock()
	f.submits = append(f.submits, req)
	f.mu.Unlock()
	if f.submit != nil {
		return f.submit(req)
	}
	return control.RecipeSubmission{ID: "rs_1", Status: "needs_human", Verdict: "Passed screening."}, nil
}

func (f *fakeRegistry) RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (control.RecipeSubmission, error) {
	f.mu.Lock()
	f.polls++
	n := f.polls
	f.mu.Unlock()
	if id != "rs_1" {
		return control.RecipeSubmission{}, agentvault.Errorf(agentvault.CodeNotFound, "no recipe submission has this id")
	}
	if f.pollWith != nil {
		return f.pollWith(n), nil
	}
	return control.RecipeSubmission{ID: id, Status: "approved", Verdict: "Accepted by the owner; the recipe is live."}, nil
}

// countingControl is standInControl that counts the sessions opened.
type countingControl struct {
	standInControl
	mu       sync.Mutex
	sessions int
}

func (c *countingControl) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	c.mu.Lock()
	c.sessions++
	c.mu.Unlock()
	return c.standInControl.CreateSession(ctx, apiKey)
}

func recipeClient(t *testing.T, cfg Config) (*mcp.ClientSession, *countingControl) {
	t.Helper()
	ctl := &countingControl{}
	cfg.Control, cfg.APIKey = ctl, "avk_test"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, ctl
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

var goodRecipe = map[string]any{"id": "shop.example.com", "kind": "merchant", "hosts": []string{"shop.example.com"}, "platform": "shopify", "status": "partial"}

// TestRecipes_AnswerWithoutSession: the three recipe tools run on their own:
// called first, they open no proxy session and name no handle; named, a
// session must still be open.
func TestRecipes_AnswerWithoutSession(t *testing.T) {
	reg := &fakeRegistry{}
	cs, ctl := recipeClient(t, Config{Recipes: reg})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get_checkout_recipes", map[string]any{"url": "https://shop.example.com/p"}},
		{"submit_checkout_recipe", map[string]any{"recipe": goodRecipe, "note": "Reached the card form."}},
		{"get_recipe_submission", map[string]any{"id": "rs_1"}},
	} {
		text, isErr := callText(t, cs, c.tool, c.args)
		if isErr || !strings.HasPrefix(text, "{") || strings.Contains(text, `"session"`) {
			t.Errorf("%s without a session: isError=%v %.120s", c.tool, isErr, text)
		}
		c.args["session"] = "s_gone"
		if text, isErr := callText(t, cs, c.tool, c.args); !isErr || !strings.Contains(text, "code=session_ended") {
			t.Errorf("%s on an ended session: %.120s", c.tool, text)
		}
	}
	if ctl.sessions != 0 {
		t.Errorf("the recipe tools opened %d proxy sessions", ctl.sessions)
	}
	if len(reg.submits) != 1 || reg.submits[0].APIKey != "avk_test" {
		t.Errorf("submission not sent under the agent's key: %+v", reg.submits)
	}
}

// TestRecipes_MCPStripsURLBeforeLookup: what leaves mcpd for a lookup has
// no query, fragment or hosted-checkout token; a string that is not a URL
// goes as it is.
func TestRecipes_MCPStripsURLBeforeLookup(t *testing.T) {
	reg := &fakeRegistry{}
	cs, _ := recipeClient(t, Config{Recipes: reg})
	text, isErr := callText(t, cs, "get_checkout_recipes", map[string]any{"url": "https://shop.example.com/checkouts/cn/Z2NwLXVzLWVhc3QxOjAxSjlYN0RGNUQ4?key=secret#step"})
	if isErr || !strings.HasPrefix(text, `{"status":"ok","merchant":{`) {
		t.Errorf("lookup answer: %.200s", text)
	}
	callText(t, cs, "get_checkout_recipes", map[string]any{"url": "shop.example.com"})
	if len(reg.urls) != 2 || reg.urls[0] != "https://shop.example.com/checkouts/cn" || reg.urls[1] != "shop.example.com" {
		t.Errorf("URLs sent to the registry: %q", reg.urls)
	}
}

// TestRecipes_RegistryDeadline: a registry call that does not answer in its
// time (20 s; shortened here) fails with timeout and says so.
func TestRecipes_RegistryDeadline(t *testing.T) {
	cs, _ := recipeClient(t, Config{Recipes: &fakeRegistry{block: true}, RegistryTimeout: 50 * time.Millisecond})
	text, isErr := callText(t, cs, "get_checkout_recipes", map[string]any{"url": "https://shop.example.com/"})
	if !isErr || !strings.HasPrefix(text, "status=error code=timeout") || !strings.Contains(text, "did not answer") {
		t.Errorf("slow registry: %q", text)
	}
}

// TestRecipes_SubmitWaitsThenAnswersPending: submit keeps polling a pending
// screening up to its wait (45 s; shortened here) and answers the verdict
// once there is one; a screening that outlasts the wait answers pending
// with an empty verdict, and get_recipe_submission polls the same id.
func TestRecipes_SubmitWaitsThenAnswersPending(t *testing.T) {
	pending := func(control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
		return control.RecipeSubmission{ID: "rs_1", Status: "pending"}, nil
	}
	reg := &fakeRegistry{submit: pending, pollWith: func(n int) control.RecipeSubmission {
		if n < 3 {
			return control.RecipeSubmission{ID: "rs_1", Status: "pending", Verdict: "half-done"}
		}
		return control.RecipeSubmission{ID: "rs_1", Status: "needs_human", Verdict: "Passed screening."}
	}}
	cs, _ := recipeClient(t, Config{Recipes: reg, RecipeScreenWait: 10 * time.Second})
	text, isErr := callText(t, cs, "submit_checkout_recipe", map[string]any{"recipe": goodRecipe})
	if isErr || text != `{"_status":"ok","id":"rs_1","status":"needs_human","verdict":"Passed screening."}` {
		t.Errorf("submit after a slow screening: %s", text)
	}

	stuck := &fakeRegistry{submit: pending, pollWith: func(int) control.RecipeSubmission {
		time.Sleep(20 * time.Millisecond)
		return control.RecipeSubmission{ID: "rs_1", Status: "pending", Verdict: "not for agents"}
	}}
	cs, _ = recipeClient(t, Config{Recipes: stuck, RecipeScreenWait: 100 * time.Millisecond})
	text, isErr = callText(t, cs, "submit_checkout_recipe", map[string]any{"recipe": goodRecipe})
	if isErr || text != `{"_status":"ok","id":"rs_1","status":"pending","verdict":""}` {
		t.Errorf("submit whose screening outlasts the wait: %s", text)
	}
	if len(stuck.submits) != 1 {
		t.Errorf("the submission was sent %d times", len(stuck.submits))
	}
	text, _ = callText(t, cs, "get_recipe_submission", map[string]any{"id": "rs_1"})
	if !strings.Contains(text, `"status":"pending","verdict":""`) {
		t.Errorf("poll: %s", text)
	}
	if text, isErr := callText(t, cs, "get_recipe_submission", map[string]any{"id": "rs_other"}); !isErr || !strings.HasPrefix(text, "status=error code=not_found") {
		t.Errorf("unknown id: %q", text)
	}
}

// TestRecipes_InvalidRecipeIsToolError: invalid_recipe and rate_limited
// reach the agent as isError results with their codes, the message, and
// for invalid_recipe the advice not to resend it unchanged.
func TestRecipes_InvalidRecipeIsToolError(t *testing.T) {
	reg := &fakeRegistry{submit: func(req control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
		if req.Note == "budget" {
			return control.RecipeSubmission{}, agentvault.Errorf(agentvault.CodeRateLimited, "20 recipe submissions in 24 hours is the limit for this key")
		}
		return control.RecipeSubmission{}, agentvault.Errorf(agentvault.CodeInvalidRecipe, "invalid recipe: status verified is given by the owner only")
	}}
	cs, _ := recipeClient(t, Config{Recipes: reg})
	text, isErr := callText(t, cs, "submit_checkout_recipe", map[string]any{"recipe": goodRecipe})
	if !isErr || !strings.HasPrefix(text, "status=error code=invalid_recipe\n") || !strings.Contains(text, "owner only") || !strings.Contains(text, "refused again") {
		t.Errorf("invalid recipe: %q", text)
	}
	text, isErr = callText(t, cs, "submit_checkout_recipe", map[string]any{"recipe": goodRecipe, "note": "budget"})
	if !isErr || !strings.HasPrefix(text, "status=error code=rate_limited") {
		t.Errorf("budget spent: %q", text)
	}
}
