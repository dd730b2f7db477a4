package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/vault"
)

// Who may open each route is decided by package authz (P24): every route is
// registered through route, which takes its rule from authz's table and
// refuses to start with a route the table does not name. This file turns a
// signed-in account into an authz.Subject (its role, and for an admin the
// areas the owner delegated) and serves the owner's delegation page.

// delegationBlob is the vault blob holding the areas the owner delegated to
// admins: in the store, so every replica reads the same.
const delegationBlob = "authz.admin-areas"

// route registers pattern with the rule authz gives it.
func (h *Handler) route(m *http.ServeMux, pattern string, fn http.HandlerFunc) {
	rule := authz.MustLookup(authz.Dashboard, pattern)
	h.routes = append(h.routes, pattern)
	if rule.Level == authz.Public {
		m.HandleFunc(pattern, fn)
		return
	}
	m.HandleFunc(pattern, h.authed(pattern, rule, fn))
}

// Routes lists the patterns the handler registered, for the test that
// holds them against authz's table.
func (h *Handler) Routes() []string { return slices.Clone(h.routes) }

// subjectOf is the signed-in account as authz sees it. Without the
// credentials service every dashboard account is an owner (the appliance
// had no other people then).
func (h *Handler) subjectOf(ctx context.Context, email string) (authz.Subject, error) {
	role := authz.Owner
	if h.creds != nil {
		p, err := h.creds.PrincipalFor(ctx, h.svc.Org(), email)
		switch {
		case err == nil:
			role = p.Role
		case agentvault.ErrorCode(err) == agentvault.CodeForbidden:
			return authz.Subject{Kind: authz.PersonKind, User: email}, nil // signed in, no role: nothing beyond their own sign-out
		default:
			return authz.Subject{}, err
		}
	}
	var areas []authz.Area
	if role == authz.Admin {
		var err error
		if areas, err = h.adminAreas(ctx); err != nil {
			return authz.Subject{}, err
		}
	}
	return authz.PersonAs(email, role, areas), nil
}

// adminAreas reads what the owner delegated to admins (none until the
// owner chooses).
func (h *Handler) adminAreas(ctx context.Context) ([]authz.Area, error) {
	b, err := h.vault.OpenBlob(ctx, delegationBlob)
	if errors.Is(err, vault.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var areas []authz.Area
	if err := json.Unmarshal(b, &areas); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "the admins' delegated areas do not parse")
	}
	return slices.DeleteFunc(areas, func(a authz.Area) bool { return !authz.ValidArea(a) }), nil
}

// refuse answers a route the subject may not take: 403 with who can. The
// dashboard's home (approvals) sends someone who may not see approvals to
// their credentials instead, the page every person may open.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, pattern string, err error) {
	if pattern == "GET /{$}" {
		http.Redirect(w, r, "/credentials", http.StatusSeeOther)
		return
	}
	h.fail(w, r, http.StatusForbidden, "Not allowed: "+agentvault.ErrorMessage(err)+".")
}

type delegationData struct {
	Areas     []authz.Area
	Names     map[authz.Area]string
	Delegated []authz.Area
}

func (h *Handler) delegationPage(w http.ResponseWriter, r *http.Request) {
	areas, err := h.adminAreas(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.page(w, r, "delegation", "What admins may do", delegationData{Areas: authz.Areas, Names: authz.AreaNames, Delegated: areas})
}

func (h *Handler) saveDelegation(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	var areas []authz.Area
	for _, v := range r.PostForm["area"] {
		a := authz.Area(v)
		if !authz.ValidArea(a) {
			h.redirect(w, r, "/delegation", "", "unknown area "+strconv.Quote(trimMsg(v)))
			return
		}
		if !slices.Contains(areas, a) {
			areas = append(areas, a)
		}
	}
	b, _ := json.Marshal(areas)
	if err := h.vault.SealBlob(r.Context(), delegationBlob, b); err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.Info("admin areas changed", "areas", len(areas))
	h.redirect(w, r, "/delegation", "Saved what admins may do.", "")
}
