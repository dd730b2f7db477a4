package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// Values typed into the forms. The 4-digit amex code is a short canary:
// leakcheck reads it only where a page or a log line holds a field.
const (
	newNumber  = "371449635398431"
	newSpaced  = "3714 496353 98431"
	newCVV     = "8604"
	newPW      = "s3cret-Form-Passw0rd!"
	newTOTP    = "JBSWY3DPEHPK3PXP"
	newTOTPRaw = "JBSW Y3DP EHPK 3PXP"
)

func cardForm(number, cvv string) url.Values {
	return url.Values{"number": {number}, "cvv": {cvv}, "exp_month": {"07"}, "exp_year": {"2031"}, "holder": {"Grace Hopper"},
		"dest": {"list"}, "sites": {"Shop.Example.com\nbooks.example, shop.example.com"},
		"bill_line1": {"1 Harbour Road"}, "bill_city": {"Arlington"}, "bill_postal_code": {"22201"}, "bill_country": {"us"}}
}

func loginForm(pw string) url.Values {
	return url.Values{"site": {"accounts.example.org"}, "website": {"https://accounts.example.org/signin"},
		"email": {"grace@example.org"}, "username": {"ghopper"}, "password": {pw}, "totp": {newTOTPRaw}}
}

func (e *env) find(pred func(vault.Item) bool) (vault.Item, bool) {
	e.t.Helper()
	items, err := e.vault.List(context.Background(), org)
	if err != nil {
		e.t.Fatal(err)
	}
	i := slices.IndexFunc(items, pred)
	if i < 0 {
		return vault.Item{}, false
	}
	return items[i], true
}

func (e *env) released(it vault.Item, f vault.Field) vault.Secret {
	e.t.Helper()
	s, err := e.vault.Release(context.Background(), vault.ReleaseArgs{Org: org, ItemID: it.ID, Field: f, Destination: "test", Actor: "test", Purpose: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// secretInput matches an input element named name, to check its attributes.
func secretInput(body, name string) string {
	return regexp.MustCompile(`<input name="` + name + `"[^>]*>`).FindString(body)
}

func TestAddCardThroughForm(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	resp, err := e.client.Get(e.srv.URL + "/cards/new")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("form page: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	_, page := e.get("/cards/new")
	for _, name := range []string{"number", "cvv"} {
		in := secretInput(page, name)
		if !strings.Contains(in, `autocomplete="off"`) || strings.Contains(in, "value=") {
			t.Errorf("%s input: %s", name, in)
		}
	}
	code, body := e.post("/cards/new", "/cards", cardForm(newSpaced, newCVV))
	if code != 200 || !strings.Contains(body, "Card added: Amex •••• 8431") {
		t.Fatalf("add: %d", code)
	}
	it, ok := e.find(func(it vault.Item) bool { return it.Kind == vault.KindCard && it.Card.Last4 == "8431" })
	if !ok {
		t.Fatal("the card is not in the vault")
	}
	c := it.Card
	if c.AnySite || !slices.Equal(c.Sites, []string{"shop.example.com", "books.example"}) || c.ExpiryMonth != 7 || c.ExpiryYear != 2031 ||
		c.HolderName != "Grace Hopper" || c.CVVLen != 4 || c.Billing == nil || c.Billing.Country != "US" {
		t.Fatalf("stored card: %+v", c)
	}
	if !e.released(it, vault.FieldNumber).Equal(vault.NewSecret([]byte(newNumber))) || !e.released(it, vault.FieldCVV).Equal(vault.NewSecret([]byte(newCVV))) {
		t.Fatal("the sealed number or CVV is not what was typed")
	}
	_, list := e.get("/cards")
	if !strings.Contains(list, "Amex •••• 8431") || !strings.Contains(list, "shop.example.com, books.example") || strings.Contains(list, newNumber) {
		t.Fatal("the cards page does not list the new card masked with its sites")
	}

	// Live CVV: no code stored, the rule is set.
	f := cardForm("5555 5555 5555 4444", "")
	f.Set("live_cvv", "on")
	f.Set("dest", "any")
	if code, body := e.post("/cards/new", "/cards", f); code != 200 || !strings.Contains(body, "Mastercard •••• 4444") {
		t.Fatalf("live-CVV card: %d", code)
	}
	mc, _ := e.find(func(it vault.Item) bool { return it.Kind == vault.KindCard && it.Card.Last4 == "4444" })
	if mc.Has(vault.FieldCVV) || mc.Card.CVVLen != 0 || !mc.Card.AnySite || len(mc.Card.Sites) != 0 {
		t.Fatalf("live-CVV card stored: %+v", mc.Card)
	}
	if p, _ := e.svc.CardPolicy(context.Background(), mc.ID); !p.Rules.LiveCVV {
		t.Fatal("the live-CVV rule is not set")
	}
}

// TestAddCardRefusedWithoutEcho: a refused card comes back with a message
// next to each bad input, the other inputs as typed, and never the number
// or the code, in the page, the log or a redirect.
func TestAddCardRefusedWithoutEcho(t *testing.T) {
	const badNumber = "4242424242424241" // fails Luhn
	const badCVV = "5831"                // a visa code has 3 digits
	e := newEnv(t)
	e.signIn(ownerPW)
	before, _ := e.vault.List(context.Background(), org)
	f := cardForm(badNumber, badCVV)
	f.Set("sites", "co.uk")
	f.Set("exp_month", "13")
	e.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	code, body := e.post("/cards/new", "/cards", f)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("bad card: %d, want 422 (no redirect)", code)
	}
	for _, want := range []string{"fails the Luhn check", "expiry month must be 1 to 12", "registrable domain", "type them again",
		`value="Grace Hopper"`, `value="1 Harbour Road"`, ">co.uk</textarea>", `value="13"`} {
		if !strings.Contains(body, want) {
			t.Errorf("re-rendered form lacks %q", want)
		}
	}
	typed := leakcheck.New(leakcheck.Value("typed number", badNumber), leakcheck.Value("typed cvv", badCVV),
		leakcheck.Value("the number's first 12 digits", "424242424242"))
	typed.Text(t, "the re-rendered form", []byte(body))
	typed.Logs(t, "the dashboard's log", []byte(e.logs.String()))
	for _, name := range []string{"number", "cvv"} {
		if in := secretInput(body, name); in == "" || strings.Contains(in, "value=") {
			t.Errorf("re-rendered %s input: %q", name, in)
		}
	}
	// An amex code given to a visa: only the CVV is named.
	f = cardForm(cardNumber, badCVV)
	f.Set("dest", "any")
	code, body = e.post("/cards/new", "/cards", f)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "a visa CVV has 3 digits") || strings.Contains(body, "Luhn") || strings.Contains(body, badCVV) {
		t.Fatalf("bad CVV: %d", code)
	}
	after, _ := e.vault.List(context.Background(), org)
	if len(after) != len(before) {
		t.Fatalf("a refused card was stored: %d items, had %d", len(after), len(before))
	}
}

func TestAddLoginThroughForm(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	_, page := e.get("/logins/new")
	for _, name := range []string{"password", "totp"} {
		in := secretInput(page, name)
		if !strings.Contains(in, `autocomplete="off"`) || !strings.Contains(in, `type="password"`) || strings.Contains(in, "value=") {
			t.Errorf("%s input: %s", name, in)
		}
	}
	// Refused: a public suffix and a bad email, the password not echoed.
	f := loginForm(newPW)
	f.Set("site", "co.uk")
	f.Set("email", "not an email")
	code, body := e.post("/logins/new", "/logins", f)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "registrable domain") || !strings.Contains(body, "email address is not valid") ||
		!strings.Contains(body, `value="ghopper"`) {
		t.Fatalf("bad login: %d", code)
	}
	if strings.Contains(body, newPW) || strings.Contains(body, newTOTP) || strings.Contains(body, "Y3DP") {
		t.Fatal("the refused form echoes the password or the seed")
	}
	code, body = e.post("/logins/new", "/logins", loginForm(newPW))
	if code != 200 || !strings.Contains(body, "Login added for example.org, token label example") {
		t.Fatalf("add: %d", code)
	}
	it, ok := e.find(func(it vault.Item) bool { return it.Kind == vault.KindLogin && it.Login.Site == "example.org" })
	if !ok || !it.Login.HasTOTP || it.Login.PasswordLen != len(newPW) || it.Login.Username != "ghopper" {
		t.Fatalf("stored login: %+v", it.Login)
	}
	// The TOTP field releases the code of the vault's (fixed) clock, never
	// the seed (P23): the code proves the seed is what was typed.
	totpCode, err := vault.TOTPCode(vault.NewSecret([]byte(newTOTP)), time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !e.released(it, vault.FieldPassword).Equal(vault.NewSecret([]byte(newPW))) || !e.released(it, vault.FieldTOTP).Equal(totpCode) {
		t.Fatal("the sealed password or seed is not what was typed (seed without its spaces)")
	}
	_, list := e.get("/logins")
	if !strings.Contains(list, "example.org") || !strings.Contains(list, "g•••@example.org") || strings.Contains(list, "grace@example.org") {
		t.Fatal("the logins page does not list the new login masked")
	}
}

// TestP13_P11_DashboardFormsLeaveNoPlaintext adds a card and a login
// through the forms (and one refused card), then greps the SQLite file,
// its WAL and shm, every log line and every page for the typed number,
// CVV, password and TOTP seed.
func TestP13_P11_DashboardFormsLeaveNoPlaintext(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	if code, _ := e.post("/cards/new", "/cards", cardForm(newNumber, newCVV)); code != 200 {
		t.Fatalf("add card: %d", code)
	}
	if code, _ := e.post("/logins/new", "/logins", loginForm(newPW)); code != 200 {
		t.Fatalf("add login: %d", code)
	}
	bad := cardForm("4000056655665557", "4417") // a valid number, a 4-digit code for a visa
	if code, _ := e.post("/cards/new", "/cards", bad); code != http.StatusUnprocessableEntity {
		t.Fatalf("refused card: %d", code)
	}
	if _, ok := e.find(func(it vault.Item) bool { return it.Kind == vault.KindLogin && it.Login.Site == "example.org" }); !ok {
		t.Fatal("login not stored")
	}
	typed := leakcheck.New(leakcheck.Value("card number", newNumber), leakcheck.Value("cvv", newCVV), leakcheck.Value("password", newPW),
		leakcheck.Value("totp seed", newTOTP), leakcheck.Value("refused card number", "4000056655665557"), leakcheck.Value("refused card's cvv", "4417"))
	var files int
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(e.dbPath + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		files++
		// At rest only the long values can be looked for: a four-digit
		// string turns up by chance in a file of random ciphertext. The
		// CVVs are sealed with their numbers, which are looked for.
		typed.Binary(t, "vault.db"+suffix, b)
	}
	if files < 2 {
		t.Fatalf("expected the database and its WAL, read %d files", files)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "card added") || !strings.Contains(logs, "login added") || !strings.Contains(logs, "card refused") {
		t.Fatal("the additions were not logged at all")
	}
	for _, p := range []string{"/", "/cards", "/cards/new", "/logins", "/logins/new", "/activity", "/keys"} {
		_, body := e.get(p)
		typed.Text(t, "the page "+p, []byte(body))
	}
	typed.Logs(t, "the dashboard's log", []byte(logs))
}

func TestEditCardUse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.signIn(ownerPW)
	_, page := e.get("/cards")
	if !strings.Contains(page, `action="/cards/`+e.card.ID+`/use"`) || !strings.Contains(page, `href="/cards/`+e.card.ID+`/remove"`) {
		t.Fatal("the cards page has no edit form or remove link")
	}
	code, body := e.post("/cards", "/cards/"+e.card.ID+"/use", url.Values{"dest": {"list"}, "sites": {"pay.example.com\nBooks.Example"}, "holder": {"A. Lovelace"},
		"bill_line1": {"12 St James's Square"}, "bill_city": {"London"}, "bill_postal_code": {"SW1Y 4JH"}, "bill_country": {"gb"}})
	if code != 200 || !strings.Contains(body, "where it may be used saved") {
		t.Fatalf("save: %d", code)
	}
	it, err := e.vault.Get(ctx, org, e.card.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.Card.AnySite || !slices.Equal(it.Card.Sites, []string{"pay.example.com", "books.example"}) || it.Card.HolderName != "A. Lovelace" ||
		it.Card.Billing == nil || it.Card.Billing.Country != "GB" || it.Card.Billing.City != "London" {
		t.Fatalf("after edit: %+v", it.Card)
	}
	if h := e.released(it, vault.FieldHolder); string(h.InsecureRawBytes()) != "A. Lovelace" {
		t.Fatal("the holder field was not re-sealed")
	}
	for name, f := range map[string]url.Values{
		"public suffix": {"dest": {"list"}, "sites": {"com"}, "holder": {"A. Lovelace"}},
		"empty list":    {"dest": {"list"}, "sites": {""}, "holder": {"A. Lovelace"}},
		"bad billing":   {"dest": {"list"}, "sites": {"pay.example.com"}, "bill_line1": {"somewhere"}},
	} {
		if _, body := e.post("/cards", "/cards/"+e.card.ID+"/use", f); !strings.Contains(body, `class="error"`) {
			t.Errorf("%s: no error shown", name)
		}
	}
	if _, page := e.get("/cards"); !strings.Contains(page, `value="SW1Y 4JH"`) {
		t.Fatal("the edit form does not show the stored billing address")
	}
	if got, _ := e.vault.Get(ctx, org, e.card.ID); !slices.Equal(got.Card.Sites, it.Card.Sites) || got.Card.Billing == nil {
		t.Fatal("a refused edit changed the card")
	}
	if code, _ := e.post("/cards", "/cards/"+e.card.ID+"/use", url.Values{"dest": {"any"}, "sites": {"ignored.example"}, "holder": {""}}); code != 200 {
		t.Fatalf("any site: %d", code)
	}
	got, _ := e.vault.Get(ctx, org, e.card.ID)
	if !got.Card.AnySite || len(got.Card.Sites) != 0 || got.Card.HolderName != "" || got.Has(vault.FieldHolder) || got.Card.Billing != nil {
		t.Fatalf("after any-site: %+v", got.Card)
	}
	if code, _ := e.post("/cards", "/cards/"+e.login.ID+"/use", url.Values{"dest": {"any"}}); code != http.StatusNotFound {
		t.Fatalf("editing a login as a card: %d", code)
	}
}

func TestItemFormsNeedCSRF(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	before, _ := e.vault.List(context.Background(), org)
	for path, f := range map[string]url.Values{
		"/cards":                            cardForm(newNumber, newCVV),
		"/logins":                           loginForm(newPW),
		"/cards/" + e.card.ID + "/use":      {"dest": {"list"}, "sites": {"evil.example"}},
		"/cards/" + e.card.ID + "/remove":   {"confirm": {"yes"}},
		"/logins/" + e.login.ID + "/remove": {"confirm": {"yes"}},
	} {
		f.Set("csrf", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		if code, body := e.do(http.MethodPost, path, f); code != http.StatusForbidden || strings.Contains(body, newNumber) {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
	}
	after, _ := e.vault.List(context.Background(), org)
	if c, err := e.vault.Get(context.Background(), org, e.card.ID); err != nil || len(after) != len(before) || !c.Card.AnySite {
		t.Fatal("a refused form changed the vault")
	}
}

func TestRemoveCardAndLogin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.signIn(ownerPW)
	if _, body := e.post("/cards", "/cards/"+e.card.ID, url.Values{"currency": {"EUR"}, "daily": {"50"}}); !strings.Contains(body, "Card rules saved") {
		t.Fatal("rules not saved")
	}
	code, page := e.get("/cards/" + e.card.ID + "/remove")
	if code != 200 || !strings.Contains(page, "Remove Visa •••• 4242 (card ") || !strings.Contains(page, `name="confirm" value="yes"`) ||
		!strings.Contains(page, `href="/cards" aria-current="page"`) {
		t.Fatalf("confirmation page: %d", code)
	}
	if code, _ := e.post("/cards/"+e.card.ID+"/remove", "/cards/"+e.card.ID+"/remove", url.Values{}); code != http.StatusBadRequest {
		t.Fatalf("remove without confirming: %d", code)
	}
	if code, _ := e.post("/cards/"+e.card.ID+"/remove", "/logins/"+e.card.ID+"/remove", url.Values{"confirm": {"yes"}}); code != http.StatusNotFound {
		t.Fatalf("a card removed as a login: %d", code)
	}
	if _, err := e.vault.Get(ctx, org, e.card.ID); err != nil {
		t.Fatal("the card went before it was confirmed")
	}
	code, body := e.post("/cards/"+e.card.ID+"/remove", "/cards/"+e.card.ID+"/remove", url.Values{"confirm": {"yes"}})
	if code != 200 || !strings.Contains(body, "Visa •••• 4242 (card 1, exp ") || !strings.Contains(body, "No cards in the vault yet") {
		t.Fatalf("remove: %d", code)
	}
	if _, err := e.vault.Get(ctx, org, e.card.ID); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("card still there: %v", err)
	}
	if p, _ := e.svc.CardPolicy(ctx, e.card.ID); p.Currency != "" || p.Rules.DailyCap != nil {
		t.Fatal("the removed card's rules are still stored")
	}
	code, body = e.post("/logins/"+e.login.ID+"/remove", "/logins/"+e.login.ID+"/remove", url.Values{"confirm": {"yes"}})
	if code != 200 || !strings.Contains(body, "github.com login removed") {
		t.Fatalf("remove login: %d", code)
	}
	if _, err := e.vault.Get(ctx, org, e.login.ID); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("login still there: %v", err)
	}
	if code, _ := e.get("/logins/" + e.login.ID + "/remove"); code != http.StatusNotFound {
		t.Fatalf("confirmation for a removed login: %d", code)
	}
}
