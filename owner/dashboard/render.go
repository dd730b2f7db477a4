package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

//go:embed templates/*.html style.css
var files embed.FS

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	CSRF    string
	Email   string
	Sub     authz.Subject // the signed-in person, for the menu (can)
	Pending []owner.Approval
	Flash   string
	Error   string
	Data    any
	Now     time.Time
}

var funcs = template.FuncMap{
	// can: whether the signed-in person may open a route (the menu shows
	// only those; the route decides again when it is used).
	"can":       func(p *page, pattern string) bool { return authz.CanSee(p.Sub, authz.Dashboard, pattern) },
	"roleOf":    func(p *page) string { return string(p.Sub.Role) },
	"hasArea":   func(list []authz.Area, a authz.Area) bool { return slices.Contains(list, a) },
	"itemName":  itemName,
	"maskEmail": maskEmail,
	"amount": func(a *policy.Amount) string {
		if a == nil {
			return ""
		}
		return a.Decimal()
	},
	"money": func(a any) string {
		switch v := a.(type) {
		case *policy.Amount:
			if v == nil {
				return "—"
			}
			return v.String()
		case policy.Amount:
			if v.Currency == "" {
				return "—"
			}
			return v.String()
		}
		return "—"
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"until": func(t, now time.Time) string {
		d := t.Sub(now).Round(time.Minute)
		if d <= 0 {
			return "now"
		}
		return "in " + strings.TrimSuffix(d.String(), "0s")
	},
	"has": func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	},
	"join":  strings.Join,
	"lines": func(s []string) string { return strings.Join(s, "\n") },
	"kindLabel": func(k owner.ApprovalKind) string {
		switch k {
		case owner.KindNewDestination:
			return "New site"
		case owner.KindPurchase:
			return "Purchase"
		case owner.KindCVVEntry:
			return "Security code"
		case owner.KindSignup:
			return "Signup"
		case owner.KindTOTPReplace:
			return "New authenticator secret"
		}
		return string(k)
	},
	"itemKind":     func(it approvalItem) string { return it.kindLabel() },
	"reasonText":   reasonText,
	"approveMeans": approveMeans,
	// auditWhat names an audit record's action in the owner's words.
	"auditWhat": func(r vault.AuditRecord) string {
		if r.Action == vault.AuditSign {
			return "signed as the agent (" + r.Purpose + ")"
		}
		if r.Action != vault.AuditRelease {
			return string(r.Action)
		}
		switch r.Purpose {
		case purposeSubstitute:
			return "sent to site"
		case purposeAuthorize:
			return "authorized (not sent)"
		}
		return "released (" + r.Purpose + ")"
	},
	// askingCode: the Approvals page shows a security code field, so it
	// must not refresh itself under the owner's typing (a meta refresh:
	// the dashboard runs no script).
	"askingCode": func(p *page) bool {
		if d, ok := p.Data.(map[string]any); !ok || d["LiveCVV"] != true {
			return false
		}
		for _, a := range p.Pending {
			if a.Kind == owner.KindCVVEntry {
				return true
			}
		}
		return false
	},
}

// approveMeans says what a yes does, before the owner gives it: above all
// that a new site stays authorized after this one fill.
func approveMeans(a owner.Approval) string {
	switch a.Kind {
	case owner.KindNewDestination:
		return "Approving authorizes " + a.Site + " (and its subdomains) for good: agents may fill forms there from now on, with any card or login their key may use, until you remove it on the Sites page."
	case owner.KindPurchase:
		if a.Amount != nil {
			return "Approving lets this one purchase of " + a.Amount.String() + " on " + a.Site + " go through; the next one is checked again."
		}
		return "Approving lets this one purchase on " + a.Site + " go through; the next one is checked again."
	case owner.KindCVVEntry:
		return "Approving sends the security code you type to " + a.Site + " for this one purchase; it is not stored."
	case owner.KindSignup:
		return "Approving lets the agent create an account on " + a.Site + "."
	case owner.KindTOTPReplace:
		return "Approving replaces the authenticator (TOTP) secret stored for this login with the one the page below showed on " + a.Site +
			", and deletes the current one: codes the vault fills will then come from the new secret. Approve only if you asked for a new authenticator on " +
			a.Site + " just now; denying keeps the stored secret and deletes the new one."
	}
	return ""
}

// reasonText explains a reason in the owner's words.
func reasonText(reason string) string {
	switch policy.Reason(reason) {
	case policy.ReasonNewDestination:
		return "An agent wants to fill a form on a site you have not authorized."
	case policy.ReasonOverThreshold:
		return "The total is over this card's approval threshold."
	case policy.ReasonEveryPurchase:
		return "You approve every purchase with this card."
	case policy.ReasonAmountMismatch:
		return "The total differs from the one you approved."
	case policy.ReasonAmountUnknown, policy.ReasonAmountUnknownStrict:
		return "The checkout total could not be read from the page."
	case policy.ReasonAmountUnconvertible:
		return "The total is in a currency the rate table cannot convert."
	case policy.ReasonCVVEntry:
		return "This card's security code is not stored; it must be typed for this purchase."
	case policy.ReasonCVVAgain:
		return "The security code was already used for this purchase; the agent asks to enter it again."
	case policy.Reason(owner.KindTOTPReplace):
		return "An agent read a new authenticator secret for a login that already has one."
	}
	return reason
}

// itemName is how an item is shown: never a value, only metadata.
// approvalItem is a vault item as an approval names it.
type approvalItem struct {
	Kind vault.Kind
	Name string // approvalItemName
}

// kindLabel heads the item's line: "Card", "Login", or "Item" for one the
// vault no longer holds.
func (it approvalItem) kindLabel() string {
	switch it.Kind {
	case vault.KindCard:
		return "Card"
	case vault.KindLogin:
		return "Login"
	case "":
		return "Item"
	}
	return strings.ToUpper(string(it.Kind[:1])) + string(it.Kind[1:])
}

// approvalItemName is how an approval names its item: a login also by its
// label, which tells two logins of one site apart (the owner is asked
// about one of them, e.g. replacing its authenticator secret).
func approvalItemName(it vault.Item) string {
	if it.Kind == vault.KindLogin && it.Login != nil {
		return itemName(it) + " " + it.Label
	}
	return itemName(it)
}

func itemName(it vault.Item) string {
	switch {
	case it.Kind == vault.KindCard && it.Card != nil:
		brand := it.Card.Brand
		if brand == "" {
			brand = "card"
		}
		// Label, last 4 and expiry tell two cards of one brand apart.
		return fmt.Sprintf("%s •••• %s (card %s, exp %02d/%02d)", strings.ToUpper(brand[:1])+brand[1:], it.Card.Last4, it.Label, it.Card.ExpiryMonth, it.Card.ExpiryYear%100)
	case it.Kind == vault.KindLogin && it.Login != nil:
		return it.Login.Site + " login"
	}
	return string(it.Kind) + " " + it.Label
}

// maskEmail shows the first letter and the domain: m•••@example.com.
func maskEmail(e string) string {
	at := strings.LastIndexByte(e, '@')
	if at < 1 {
		if e == "" {
			return "—"
		}
		return "•••"
	}
	return e[:1] + "•••" + e[at:]
}

var pages = map[string]*template.Template{}

func init() {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	for _, name := range []string{"signin", "error", "approvals", "cards", "logins", "keys", "sites", "signups", "activity", "cardnew", "loginnew", "confirm", "recipes", "credentials", "credentialentry", "notifications", "delegation"} {
		t := template.Must(layout.Clone())
		pages[name] = template.Must(t.ParseFS(files, "templates/"+name+".html"))
	}
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page) {
	if p.Now.IsZero() {
		p.Now = h.now()
	}
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		h.log.Error("dashboard template failed", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) style(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	_, _ = w.Write(b)
}
