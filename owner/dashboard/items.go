package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/cardcheck"
	"github.com/agentvault/agentvault/vault"
)

// itemOwner is the owner recorded on items added here, as the CLI's default.
const itemOwner = "owner"

// takeSecret reads a secret input (number, cvv, password, totp) and drops
// it from the parsed form, so nothing later (a re-render, a log of the
// form) can reach it. Secret inputs are never written back into a page, a
// redirect, a flash or a log line; the copy in net/http's parsed form is a
// Go string and cannot be wiped, the bytes here are once used.
func takeSecret(r *http.Request, name string) []byte {
	v := []byte(r.PostFormValue(name))
	delete(r.PostForm, name)
	delete(r.Form, name)
	return v
}

func wipeBytes(b []byte) {
	for i := range b {
		b[i] = 0
	}
}

// digitsOnly keeps the digits of a card number or CVV typed with spaces or
// dashes ("4242 4242 4242 4242"); anything else stays so the vault refuses
// it.
func digitsOnly(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c != ' ' && c != '-' {
			out = append(out, c)
		}
	}
	return out
}

// splitSites reads a site list typed one per line or separated by commas or
// spaces.
func splitSites(s string) []string {
	return strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' || c == ',' || c == ' ' || c == '\t' })
}

// fieldErrors maps a form input to its message; "" holds what concerns no
// one input.
type fieldErrors map[string]string

func problems(ps []vault.InputProblem) fieldErrors {
	fe := fieldErrors{}
	for _, p := range ps {
		if _, ok := fe[p.Input]; !ok {
			fe[p.Input] = agentvault.ErrorMessage(p.Err)
		}
	}
	return fe
}

// ---- add a card ----

// cardForm is what the add-card form shows again after a refusal: every
// input but the number and the CVV, which the owner types again.
type cardForm struct {
	Month, Year string
	Holder      string
	LiveCVV     bool
	AnySite     bool
	Sites       string
	Billing     vault.AddressMeta
	HasBilling  bool
	Errs        fieldErrors
}

func (h *Handler) newCardPage(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "cardnew", "Add a card", cardForm{AnySite: true, Errs: fieldErrors{}})
}

func (h *Handler) addCard(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	number := takeSecret(r, "number")
	cvv := takeSecret(r, "cvv")
	digits, cvvDigits := digitsOnly(number), digitsOnly(cvv)
	wipeBytes(number)
	wipeBytes(cvv)
	defer wipeBytes(digits)
	defer wipeBytes(cvvDigits)

	f := cardForm{
		Month: strings.TrimSpace(r.PostFormValue("exp_month")), Year: strings.TrimSpace(r.PostFormValue("exp_year")),
		Holder: strings.TrimSpace(r.PostFormValue("holder")), LiveCVV: r.PostFormValue("live_cvv") == "on",
		AnySite: r.PostFormValue("dest") == "any", Sites: r.PostFormValue("sites"),
	}
	f.Billing, f.HasBilling = billingFromForm(r)
	month, _ := strconv.Atoi(f.Month)
	year, _ := strconv.Atoi(f.Year)
	if year >= 0 && year < 100 && len(f.Year) == 2 {
		year += 2000
	}
	in := vault.CardInput{
		Number: vault.NewSecret(digits), CVV: vault.NewSecret(cvvDigits), ExpiryMonth: month, ExpiryYear: year,
		Holder: f.Holder, AnySite: f.AnySite, LiveCVV: f.LiveCVV,
	}
	defer in.Number.Wipe()
	defer in.CVV.Wipe()
	if !f.AnySite {
		in.Sites = splitSites(f.Sites)
	}
	if f.HasBilling {
		b := f.Billing
		in.Billing = &b
	}
	if ps := vault.CheckCard(in, h.now()); len(ps) > 0 {
		f.Errs = problems(ps)
		h.log.Info("dashboard card refused", "inputs", len(f.Errs))
		h.pageStatus(w, r, http.StatusUnprocessableEntity, "cardnew", "Add a card", f)
		return
	}
	warning, err := cardcheck.Check(ctx, h.vault, h.svc.Org(), in.Number, month, year)
	if agentvault.ErrorCode(err) == agentvault.CodeConflict {
		f.Errs = fieldErrors{"number": agentvault.ErrorMessage(err)}
		h.pageStatus(w, r, http.StatusConflict, "cardnew", "Add a card", f)
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	it, err := h.vault.AddCard(ctx, h.svc.Org(), itemOwner, in)
	if err == nil {
		err = cardcheck.Record(ctx, h.vault, it, in.Number)
	}
	if err != nil {
		h.addFailed(w, r, err, "cardnew", "Add a card", func(errs fieldErrors) any { f.Errs = errs; return f })
		return
	}
	h.log.Info("card added", "item", it.ID, "label", it.Label, "by", "owner")
	if f.LiveCVV {
		// The proxy already asks for the code of a card that stores none;
		// the rule makes the cards page say so, and stays set if a CVV is
		// ever stored.
		p, err := h.svc.CardPolicy(ctx, it.ID)
		if err == nil {
			p.Rules.LiveCVV = true
			err = h.svc.SetCardPolicy(ctx, p, "owner:"+sess(r).email)
		}
		if err != nil {
			h.internal(w, r, err)
			return
		}
	}
	h.redirect(w, r, "/cards", "Card added: "+itemName(it)+", token label "+it.Label+".", warning)
}

// billingFromForm reads the optional billing address inputs; ok is false
// when all are empty.
func billingFromForm(r *http.Request) (a vault.AddressMeta, ok bool) {
	v := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	a = vault.AddressMeta{Name: v("bill_name"), Line1: v("bill_line1"), Line2: v("bill_line2"), City: v("bill_city"),
		Region: v("bill_region"), PostalCode: v("bill_postal_code"), Country: strings.ToUpper(v("bill_country"))}
	return a, a != (vault.AddressMeta{})
}

// ---- edit where a card may be used, its holder and billing address ----

func (h *Handler) saveCardUse(w http.ResponseWriter, r *http.Request) {
	anySite := r.PostFormValue("dest") == "any"
	holder := strings.TrimSpace(r.PostFormValue("holder"))
	u := vault.CardUpdate{AnySite: &anySite, Holder: &holder, Actor: "owner:" + sess(r).email}
	if b, ok := billingFromForm(r); ok {
		u.Billing = &b
	} else {
		u.ClearBilling = true
	}
	if !anySite {
		u.Sites = splitSites(r.PostFormValue("sites"))
		if u.Sites == nil {
			u.Sites = []string{}
		}
	}
	it, err := h.vault.UpdateCard(r.Context(), h.svc.Org(), r.PathValue("id"), u)
	if err != nil {
		if errors.Is(err, vault.ErrNotFound) {
			h.fail(w, r, http.StatusNotFound, "no such card")
			return
		}
		h.formErr(w, r, "/cards", err)
		return
	}
	h.log.Info("card updated", "item", it.ID, "any_site", it.Card.AnySite, "sites", len(it.Card.Sites))
	h.redirect(w, r, "/cards", itemName(it)+": where it may be used saved.", "")
}

// ---- add a login ----

// loginForm is what the add-login form shows again after a refusal: never
// the password or the TOTP seed.
type loginForm struct {
	Site, Website   string
	Email, Username string
	Errs            fieldErrors
}

// addFailed answers an add the vault refused: the input refused shows the
// form again with the vault's message (form gives it the errors), anything
// else is an internal error.
func (h *Handler) addFailed(w http.ResponseWriter, r *http.Request, err error, page, title string, form func(fieldErrors) any) {
	if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		h.internal(w, r, err)
		return
	}
	h.pageStatus(w, r, http.StatusUnprocessableEntity, page, title, form(fieldErrors{"": agentvault.ErrorMessage(err)}))
}

func (h *Handler) newLoginPage(w http.ResponseWriter, r *http.Request) {
	h.page(w, r, "loginnew", "Add a login", loginForm{Errs: fieldErrors{}})
}

func (h *Handler) addLogin(w http.ResponseWriter, r *http.Request) {
	pw := takeSecret(r, "password")
	totp := takeSecret(r, "totp")
	// A TOTP seed is base32; apps show it in groups of four.
	seed := digitsOnly(totp)
	wipeBytes(totp)
	defer wipeBytes(pw)
	defer wipeBytes(seed)
	f := loginForm{
		Site: strings.TrimSpace(r.PostFormValue("site")), Website: strings.TrimSpace(r.PostFormValue("website")),
		Email: strings.TrimSpace(r.PostFormValue("email")), Username: strings.TrimSpace(r.PostFormValue("username")),
	}
	in := vault.LoginInput{Site: f.Site, Website: f.Website, Email: f.Email, Username: f.Username,
		Password: vault.NewSecret(pw), TOTP: vault.NewSecret(seed)}
	defer in.Password.Wipe()
	defer in.TOTP.Wipe()
	if ps := vault.CheckLogin(in); len(ps) > 0 {
		f.Errs = problems(ps)
		h.log.Info("dashboard login refused", "inputs", len(f.Errs))
		h.pageStatus(w, r, http.StatusUnprocessableEntity, "loginnew", "Add a login", f)
		return
	}
	it, err := h.vault.AddLogin(r.Context(), h.svc.Org(), itemOwner, in)
	if err != nil {
		h.addFailed(w, r, err, "loginnew", "Add a login", func(errs fieldErrors) any { f.Errs = errs; return f })
		return
	}
	h.log.Info("login added", "item", it.ID, "label", it.Label, "by", "owner")
	h.redirect(w, r, "/logins", "Login added for "+it.Login.Site+", token label "+it.Label+".", "")
}

// ---- remove a card or a login ----

type confirmData struct {
	Item   vault.Item
	Name   string
	Action string
	Back   string
}

func kindPath(k vault.Kind) string { return "/" + string(k) + "s" }

// item finds the org's item id of kind k, or answers 404.
func (h *Handler) item(w http.ResponseWriter, r *http.Request, k vault.Kind) (vault.Item, bool) {
	it, err := h.vault.Get(r.Context(), h.svc.Org(), r.PathValue("id"))
	if err == nil && it.Kind == k {
		return it, true
	}
	if err == nil || errors.Is(err, vault.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, "no such "+string(k))
		return vault.Item{}, false
	}
	h.internal(w, r, err)
	return vault.Item{}, false
}

// confirmRemove asks before a removal: a plain page with one POST form, so
// it needs no script.
func (h *Handler) confirmRemove(k vault.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		it, ok := h.item(w, r, k)
		if !ok {
			return
		}
		h.page(w, r, "confirm", "Remove "+itemName(it), confirmData{Item: it, Name: itemName(it),
			Action: kindPath(k) + "/" + it.ID + "/remove", Back: kindPath(k)})
	}
}

func (h *Handler) removeItem(k vault.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("confirm") != "yes" {
			h.fail(w, r, http.StatusBadRequest, "confirm the removal on its page")
			return
		}
		it, ok := h.item(w, r, k)
		if !ok {
			return
		}
		if err := h.vault.Remove(r.Context(), h.svc.Org(), it.ID); err != nil {
			h.formErr(w, r, kindPath(k), err)
			return
		}
		if k == vault.KindCard {
			// Its rules go with it; a key's scope naming it then matches
			// nothing.
			if err := h.svc.DeleteCardPolicy(r.Context(), it.ID); err != nil && !errors.Is(err, vault.ErrNotFound) {
				h.internal(w, r, err)
				return
			}
		}
		h.log.Info(string(k)+" removed", "item", it.ID, "label", it.Label)
		h.redirect(w, r, kindPath(k), itemName(it)+" removed.", "")
	}
}
