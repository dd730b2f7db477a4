package proxyd_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/recipes"
)

// TestRecipes_ControlServiceOverMain: proxyd's control service serves the
// registry from its one store: a lookup needs no API key, a submission is
// counted against the key that sent it and only that key can poll it (for
// another it does not exist), an unknown key submits nothing, and the
// shipped platform recipes need no submission.
func TestRecipes_ControlServiceOverMain(t *testing.T) {
	m, _ := startMain(t, "", nil)
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	ctx := context.Background()
	raw, err := ctl.Recipes(ctx, "https://shop.example.com/p?x=1")
	if err != nil || string(raw) != `{"merchant":null,"platform":null,"signup":null,"signupPlatform":null}` {
		t.Fatalf("lookup on an empty registry: %s %v", raw, err)
	}
	recipe := json.RawMessage(`{"id":"shop.example.com","kind":"merchant","platform":"shopify","status":"partial","overrides":{"submit":{"selector":"#pay"}}}`)
	if _, err := ctl.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: "avk_unknown", Recipe: recipe}); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Errorf("submission under an unknown key: %v", err)
	}
	s, err := ctl.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: m.APIKey, Recipe: recipe, Note: "Reached the card form."})
	if err != nil || s.Status != "needs_human" || s.Verdict == "" {
		t.Fatalf("submission: %+v %v", s, err)
	}
	_, other, err := m.Owner.CreateAPIKey(ctx, "other agent", owner.Scope{AllCards: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.RecipeSubmission(ctx, other, s.ID, 0); agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		t.Errorf("another key polls the submission: %v, want not_found", err)
	}
	if got, err := ctl.RecipeSubmission(ctx, m.APIKey, s.ID, 0); err != nil || got.Status != "needs_human" {
		t.Errorf("the submitter polls: %+v %v", got, err)
	}
	if _, err := m.Recipes.Accept(ctx, recipesAccept(s.ID)); err != nil {
		t.Fatal(err)
	}
	raw, _ = ctl.Recipes(ctx, "https://shop.example.com/")
	var l struct {
		Merchant, Platform *struct{ ID string }
	}
	if json.Unmarshal(raw, &l); l.Merchant == nil || l.Platform == nil || l.Platform.ID != "shopify" {
		t.Errorf("lookup after acceptance: %s", raw)
	}
}

func recipesAccept(id string) recipes.AcceptArgs { return recipes.AcceptArgs{ID: id, By: "owner:test"} }
