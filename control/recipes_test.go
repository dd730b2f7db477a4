package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// recipeService answers the recipe calls of the real control handler; the
// other calls are not used here.
type recipeService struct {
	control.Service
	gotURL  string
	gotSub  control.SubmitRecipeRequest
	gotWait time.Duration
}

func (s *recipeService) Recipes(ctx context.Context, pageURL string) (json.RawMessage, error) {
	s.gotURL = pageURL
	return json.RawMessage(`{"merchant":null,"platform":null,"signup":null,"signupPlatform":null}`), nil
}

type retryErr struct{ err *agentvault.Error }

func (e retryErr) Error() string                     { return e.err.Error() }
func (e retryErr) Unwrap() error                     { return e.err }
func (e retryErr) RetryAfterDuration() time.Duration { return 90 * time.Minute }

func (s *recipeService) SubmitRecipe(ctx context.Context, req control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
	s.gotSub = req
	switch req.Note {
	case "verified":
		return control.RecipeSubmission{}, agentvault.Errorf(agentvault.CodeInvalidRecipe, "invalid recipe: status verified is the owner's")
	case "budget":
		return control.RecipeSubmission{}, retryErr{agentvault.Errorf(agentvault.CodeRateLimited, "20 in 24 hours")}
	}
	return control.RecipeSubmission{ID: "rs_1", Status: "needs_human", Verdict: "Passed screening."}, nil
}

func (s *recipeService) RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (control.RecipeSubmission, error) {
	s.gotWait = wait
	if id != "rs_1" || apiKey != "avk_good" {
		return control.RecipeSubmission{}, agentvault.Errorf(agentvault.CodeNotFound, "no such submission")
	}
	return control.RecipeSubmission{ID: id, Status: "pending"}, nil
}

// TestRecipes_ControlRoundTrip: the recipe calls through the real control
// handler and the Go client: the lookup passes the URL through, a
// submission's recipe arrives as the agent wrote it, invalid_recipe is a
// 400 that the client turns back into its code, rate_limited a 429 with
// Retry-After, and a poll's wait is capped at 25 s.
func TestRecipes_ControlRoundTrip(t *testing.T) {
	svc := &recipeService{}
	srv := httptest.NewServer(control.NewHandler(svc, "tok", nil))
	defer srv.Close()
	c := control.NewClient(srv.URL, "tok", nil)
	ctx := context.Background()

	l, err := c.Recipes(ctx, "https://shop.example.com/p")
	if err != nil || svc.gotURL != "https://shop.example.com/p" || string(l) == "" {
		t.Fatalf("lookup: %s %v (url %q)", l, err, svc.gotURL)
	}
	s, err := c.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: "avk_good", Recipe: json.RawMessage(`{"id":"shop.example.com"}`), Note: "ok"})
	if err != nil || s.ID != "rs_1" || s.Status != "needs_human" || string(svc.gotSub.Recipe) != `{"id":"shop.example.com"}` {
		t.Fatalf("submit: %+v %v (recipe %s)", s, err, svc.gotSub.Recipe)
	}
	_, err = c.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: "avk_good", Recipe: json.RawMessage(`{}`), Note: "verified"})
	if agentvault.ErrorCode(err) != agentvault.CodeInvalidRecipe {
		t.Errorf("invalid recipe came back as %v", err)
	}
	if agentvault.HTTPStatus(agentvault.CodeInvalidRecipe) != http.StatusBadRequest {
		t.Errorf("invalid_recipe maps to %d", agentvault.HTTPStatus(agentvault.CodeInvalidRecipe))
	}
	body, _ := json.Marshal(control.SubmitRecipeRequest{APIKey: "avk_good", Recipe: json.RawMessage(`{}`), Note: "budget"})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+control.SubmissionsPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "5400" {
		t.Errorf("budget refusal: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	p, err := c.RecipeSubmission(ctx, "avk_good", "rs_1", time.Minute)
	if err != nil || p.Status != "pending" || p.Verdict != "" || svc.gotWait != control.MaxWait {
		t.Errorf("poll: %+v %v (wait %v)", p, err, svc.gotWait)
	}
	if _, err := c.RecipeSubmission(ctx, "avk_good", "rs_2", 0); agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		t.Errorf("unknown id: %v", err)
	}
}
