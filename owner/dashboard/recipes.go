package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/recipes"
)

// Recipes is what the dashboard needs from the checkout recipe registry:
// the owner reviews agents' submissions (accept, reject, edit) before any
// other agent is served them. *recipes.Registry implements it.
type Recipes interface {
	Submissions(ctx context.Context, f recipes.SubmissionFilter) ([]recipes.Submission, error)
	Published(ctx context.Context) ([]recipes.Published, error)
	Accept(ctx context.Context, a recipes.AcceptArgs) (recipes.Submission, error)
	Reject(ctx context.Context, id, by, rule string) (recipes.Submission, error)
	Edit(ctx context.Context, id, by string, raw []byte) (recipes.Submission, error)
}

var _ Recipes = (*recipes.Registry)(nil)

type submissionRow struct {
	recipes.Submission
	JSON string // the recipe, indented, for reading and editing
}

type publishedRow struct {
	recipes.Published
	JSON string
}

type recipesData struct {
	Review    []submissionRow
	Decided   []submissionRow
	Published []publishedRow
}

func indented(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}

func (h *Handler) recipesPage(w http.ResponseWriter, r *http.Request) {
	if h.recipes == nil {
		h.fail(w, r, http.StatusNotFound, "the recipe registry is not part of this appliance")
		return
	}
	subs, err := h.recipes.Submissions(r.Context(), recipes.SubmissionFilter{Limit: 100})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var d recipesData
	for _, s := range subs {
		row := submissionRow{Submission: s, JSON: indented(s.Recipe)}
		switch s.Status {
		case recipes.SubmissionNeedsHuman, recipes.SubmissionPending:
			d.Review = append(d.Review, row)
		default:
			d.Decided = append(d.Decided, row)
		}
	}
	pub, err := h.recipes.Published(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	for _, p := range pub {
		d.Published = append(d.Published, publishedRow{Published: p, JSON: indented(p.Recipe)})
	}
	h.page(w, r, "recipes", "Checkout recipes", d)
}

func (h *Handler) acceptRecipe(w http.ResponseWriter, r *http.Request) {
	if h.recipes == nil {
		h.fail(w, r, http.StatusNotFound, "the recipe registry is not part of this appliance")
		return
	}
	s, err := h.recipes.Accept(r.Context(), recipes.AcceptArgs{ID: r.PathValue("id"), By: "owner:" + sess(r).email,
		Verified: r.PostFormValue("verified") == "on"})
	if err != nil {
		h.recipeErr(w, r, err)
		return
	}
	h.log.Info("recipe submission accepted", "submission", s.ID, "status", string(s.Status))
	h.redirect(w, r, "/recipes", "Submission "+s.ID+" "+string(s.Status)+": agents are served it from now on.", "")
}

func (h *Handler) rejectRecipe(w http.ResponseWriter, r *http.Request) {
	if h.recipes == nil {
		h.fail(w, r, http.StatusNotFound, "the recipe registry is not part of this appliance")
		return
	}
	s, err := h.recipes.Reject(r.Context(), r.PathValue("id"), "owner:"+sess(r).email, r.PostFormValue("rule"))
	if err != nil {
		h.recipeErr(w, r, err)
		return
	}
	h.redirect(w, r, "/recipes", "Submission "+s.ID+" rejected.", "")
}

func (h *Handler) editRecipe(w http.ResponseWriter, r *http.Request) {
	if h.recipes == nil {
		h.fail(w, r, http.StatusNotFound, "the recipe registry is not part of this appliance")
		return
	}
	s, err := h.recipes.Edit(r.Context(), r.PathValue("id"), "owner:"+sess(r).email, []byte(r.PostFormValue("recipe")))
	if err != nil {
		h.recipeErr(w, r, err)
		return
	}
	h.redirect(w, r, "/recipes", "Submission "+s.ID+" edited; it is still waiting for your decision.", "")
}

// recipeErr shows a refusal the owner can act on (a rule the edit broke, a
// submission decided meanwhile) on the page; anything else is internal.
func (h *Handler) recipeErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, recipes.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, "no such submission")
	case agentvault.ErrorCode(err) == agentvault.CodeInvalidRecipe, agentvault.ErrorCode(err) == agentvault.CodeInvalidInput,
		agentvault.ErrorCode(err) == agentvault.CodeConflict:
		h.redirect(w, r, "/recipes", "", agentvault.ErrorMessage(err))
	default:
		h.internal(w, r, err)
	}
}
