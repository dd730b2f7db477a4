package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/recipes"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RecipeControl is what the recipe tools need from proxyd's control API
// (control.Client implements it). mcpd never opens the registry's store.
type RecipeControl interface {
	Recipes(ctx context.Context, pageURL string) (json.RawMessage, error)
	SubmitRecipe(ctx context.Context, req control.SubmitRecipeRequest) (control.RecipeSubmission, error)
	RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (control.RecipeSubmission, error)
}

var _ RecipeControl = (*control.Client)(nil)

// The registry's time rules (seed 004): each registry call gets 20 s; a
// submission waits up to 45 s in all for its screening, polling proxyd in
// long polls of at most 15 s.
const (
	defaultRegistryTimeout = 20 * time.Second
	defaultScreenWait      = 45 * time.Second
	screenPoll             = 15 * time.Second
)

type recipesIn struct {
	SessionArg
	URL string `json:"url" jsonschema:"The absolute product or checkout page URL, e.g. https://shop.example.com/product/thing. Query, fragment and any hosted-checkout token are removed before the lookup; a string that is not a URL is sent unchanged, so never pass one holding a session token."`
}

type submitRecipeIn struct {
	SessionArg
	Recipe                map[string]any `json:"recipe" jsonschema:"The recipe body. A merchant recipe: id (its primary host), kind \"merchant\", hosts, platform, status (partial, unverified or dead-end; never verified), and optionally cardSurface, overrides (role -> {selector, frame}), gotchas, notes, deadEnd {reason, detail}, exampleProductUrl, preconditions. Signup and signup-platform recipes are accepted too."`
	Note                  string         `json:"note,omitempty" jsonschema:"Free text for the owner who reviews it, such as how you tested it. Never personal data. With verificationRequested it is published word for word as the recipe's evidence once approved."`
	VerificationRequested bool           `json:"verificationRequested,omitempty" jsonschema:"true only when a real purchase completed (or, for a signup recipe, an account was created) and note holds the sanitized evidence."`
}

type submissionIn struct {
	SessionArg
	ID string `json:"id" jsonschema:"The submission id submit_checkout_recipe returned."`
}

const (
	descGetRecipes = "Read the checkout recipe registry for a page before improvising a checkout: selectors, gotchas and preconditions other runs recorded for this host. " +
		"Answers JSON with four slots, each null when nothing covers the host yet: merchant (this host's recipe: overrides with CSS selector and frame per field role, gotchas, preconditions, and deadEnd when an unattended checkout cannot work there: then do not attempt it), " +
		"platform (the platform recipe the merchant names: detection, cardSurface, steps, frame and field selectors under selectors), signup (how this host's account form behaves; ownerSteps) and signupPlatform (its identity provider). " +
		"Each precondition is a step to take first, not a reason to stop: delivery_location (choose an address or postcode from your address tokens), region_select (pick the country storefront), account_required (no guest checkout: sign in or open an account). " +
		"For a signup recipe's ownerSteps: email_code, sms_code and captcha mean request_challenge_handoff; email_link means stop and tell the owner which site waits. A signup recipe is no permission to open an account. Needs no session and starts none."
	descSubmitRecipe = "Contribute what you learned about a site to the recipe registry after solving a new site, or after a dead end the registry does not know. " +
		"The owner reviews every submission before other agents are served it. Never claim status verified: send partial, unverified or dead-end and set verificationRequested with the evidence in note. " +
		"preconditions is a closed list: merchant recipes take delivery_location, region_select, account_required; signup recipes region_select, consent_gate, mode_toggle; no repeats, and leave the field out rather than sending []. " +
		"A recipe for a store the registry knows under another host is combined with it. Waits up to about 45 s for screening; answers JSON {id, status, verdict}. " +
		"Still pending: poll get_recipe_submission with the id, do not resubmit. Errors: invalid_recipe (fix what the message names; the same recipe again is refused again), rate_limited (20 submissions in any 24 hours per key: stop until the oldest is 24 hours old)."
	descGetSubmission = "Read a recipe submission's verdict; poll this instead of resubmitting. Answers JSON {id, status, verdict}: pending (screening still runs, verdict empty: poll again shortly), " +
		"needs_human (screening passed, the owner decides; nothing to do), approved (live), merged (combined with the store's existing recipe), rejected (verdict names the rule it broke). Errors: not_found (that id will never exist)."
)

func (s *Server) registerRecipeTools() {
	addTool(s, "get_checkout_recipes", descGetRecipes, true, s.getCheckoutRecipes)
	addTool(s, "submit_checkout_recipe", descSubmitRecipe, false, s.submitCheckoutRecipe)
	addTool(s, "get_recipe_submission", descGetSubmission, true, s.getRecipeSubmission)
}

// recipeSession checks a session argument the recipe tools were given:
// they run on their own, and on that session when one is named (which must
// still be open). They never start a session.
func (s *Server) recipeSession(handle string) error {
	if handle == "" {
		return nil
	}
	_, err := s.lookup(handle)
	return err
}

func (s *Server) registry() (RecipeControl, error) {
	if s.recipes == nil {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "this proxy has no recipe registry")
	}
	return s.recipes, nil
}

// registryCall gives one registry call its 20 s.
func (s *Server) registryCall(ctx context.Context, what string, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, s.registryTimeout)
	defer cancel()
	err := f(cctx)
	if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return agentvault.Wrap(agentvault.CodeTimeout, err, "The recipe registry did not answer within %s%s.", s.registryTimeout, what)
	}
	return err
}

func (s *Server) getCheckoutRecipes(ctx context.Context, in recipesIn) (*mcp.CallToolResult, error) {
	if err := s.recipeSession(in.Session); err != nil {
		return nil, err
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	// Stripped here, before anything leaves mcpd (proxyd strips again).
	pageURL := recipes.StripURL(in.URL)
	err = s.registryCall(ctx, "", func(ctx context.Context) error {
		raw, err = reg.Recipes(ctx, pageURL)
		return err
	})
	if err != nil {
		return nil, err
	}
	text, err := withStatusKeys(okStatus(), raw)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
}

func (s *Server) submitCheckoutRecipe(ctx context.Context, in submitRecipeIn) (*mcp.CallToolResult, error) {
	if err := s.recipeSession(in.Session); err != nil {
		return nil, err
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	if in.Recipe == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidRecipe, "invalid recipe: recipe is required")
	}
	body, err := json.Marshal(in.Recipe)
	if err != nil || len(body) > recipes.MaxRecipeBytes {
		return nil, agentvault.Errorf(agentvault.CodeInvalidRecipe, "invalid recipe: the recipe is larger than %d KiB", recipes.MaxRecipeBytes>>10)
	}
	start := time.Now()
	var sub control.RecipeSubmission
	err = s.registryCall(ctx, "; the submission may still have been recorded, so do not send it again at once", func(ctx context.Context) error {
		sub, err = reg.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: s.apiKeyOf(ctx), Recipe: body, Note: in.Note,
			VerificationRequested: in.VerificationRequested})
		return err
	})
	if err != nil {
		return nil, err
	}
	// Wait for the screening, up to its 45 s in all.
	for sub.Status == string(recipes.SubmissionPending) {
		left := s.screenWait - time.Since(start)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		var next control.RecipeSubmission
		err := s.registryCall(ctx, "", func(ctx context.Context) error {
			next, err = reg.RecipeSubmission(ctx, s.apiKeyOf(ctx), sub.ID, min(left, screenPoll))
			return err
		})
		if err != nil {
			break // the submission exists: answer pending and let the agent poll
		}
		sub = next
	}
	return submissionAnswer(sub)
}

func (s *Server) getRecipeSubmission(ctx context.Context, in submissionIn) (*mcp.CallToolResult, error) {
	if err := s.recipeSession(in.Session); err != nil {
		return nil, err
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	if in.ID == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "id is the submission id submit_checkout_recipe returned")
	}
	var sub control.RecipeSubmission
	err = s.registryCall(ctx, "", func(ctx context.Context) error {
		sub, err = reg.RecipeSubmission(ctx, s.apiKeyOf(ctx), in.ID, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return submissionAnswer(sub)
}

// submissionAnswer is {id, status, verdict}; the answer's own status key
// goes first as _status (the submission has a status of its own).
func submissionAnswer(sub control.RecipeSubmission) (*mcp.CallToolResult, error) {
	if sub.Status == string(recipes.SubmissionPending) {
		sub.Verdict = ""
	}
	return jsonAnswer(okStatus(), sub)
}
