package recipes

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/redact"
)

// Kind is what a recipe describes.
type Kind string

const (
	// KindMerchant is one store's checkout: its hosts, the platform it
	// runs on, selector overrides, gotchas, preconditions, a dead end.
	KindMerchant Kind = "merchant"
	// KindPlatform is a checkout platform or payment integration shared by
	// many stores (Shopify, the Stripe Payment Element). Platform recipes
	// ship with the appliance; agents do not submit them.
	KindPlatform Kind = "platform"
	// KindSignup is how one host's account-creation form behaves.
	KindSignup Kind = "signup"
	// KindSignupPlatform is an identity provider many signup forms use
	// (Auth0, Okta, Cognito, Shopify customer accounts).
	KindSignupPlatform Kind = "signup-platform"
)

// Status says how far a recipe is trusted.
type Status string

const (
	// StatusVerified is set by the owner only, when accepting a
	// submission whose run really bought something (or opened an account).
	StatusVerified   Status = "verified"
	StatusPartial    Status = "partial"
	StatusUnverified Status = "unverified"
	StatusDeadEnd    Status = "dead-end"
)

// Target is where a field or control is: a CSS selector, and the CSS
// selector of the iframe that holds it when it is inside one. It is what
// fill_checkout takes.
type Target struct {
	Selector string `json:"selector"`
	Frame    string `json:"frame,omitempty"`
}

// DeadEnd says why an unattended checkout cannot work on a host.
type DeadEnd struct {
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// DeadEndReasons is the closed set of dead-end classifications.
var DeadEndReasons = []string{
	"client_side_encryption", // the card frame encrypts in the browser: nothing to substitute
	"bot_wall",               // a CAPTCHA or block page on every attempt
	"app_only",               // purchases only in a mobile app
	"no_card_payment",        // no card payment method offered
	"phone_verification",     // every order needs a phone call or SMS from the buyer
	"in_store_only",          // no delivery or online order
	"other",
}

// Origins are where a platform's card fields live and post to (from
// policy's payment integration list).
type Origins struct {
	Frames  []string `json:"frames,omitempty"`
	PostsTo []string `json:"postsTo,omitempty"`
}

// Recipe is one registry entry. Which fields apply depends on Kind; Check
// refuses a field that does not belong to the kind.
type Recipe struct {
	// ID is the primary host for merchant and signup recipes, a short
	// name ("shopify", "stripe-payment-element", "auth0") for platforms.
	ID    string   `json:"id"`
	Kind  Kind     `json:"kind"`
	Hosts []string `json:"hosts,omitempty"`
	// Platform names the platform recipe of a merchant.
	Platform string `json:"platform,omitempty"`
	Status   Status `json:"status"`
	// CardSurface names where the card is typed (a platform id such as
	// "stripe-payment-element", or "inline" for fields on the page).
	CardSurface string `json:"cardSurface,omitempty"`
	// Overrides name the selectors of this host's fields and controls, by
	// role: email, phone, firstName, lastName, addressLine1, postalCode,
	// city, country, expMonth, expYear, expiry, cardNumber, cvc, submit,
	// success, failure, addToCart, checkout, and so on.
	Overrides         map[string]Target `json:"overrides,omitempty"`
	Gotchas           []string          `json:"gotchas,omitempty"`
	Notes             string            `json:"notes,omitempty"`
	DeadEnd           *DeadEnd          `json:"deadEnd,omitempty"`
	ExampleProductURL string            `json:"exampleProductUrl,omitempty"`
	Preconditions     []string          `json:"preconditions,omitempty"`

	// Platform recipes: how to recognise the platform, the fill steps, and
	// the frame and field selectors; Origins from the integration list.
	Detection []string          `json:"detection,omitempty"`
	Steps     []string          `json:"steps,omitempty"`
	Selectors map[string]Target `json:"selectors,omitempty"`
	Origins   *Origins          `json:"origins,omitempty"`

	// Signup recipes: what the owner does after submit, and the identity
	// provider (a signup-platform recipe id) the form belongs to.
	OwnerSteps       []string `json:"ownerSteps,omitempty"`
	IdentityProvider string   `json:"identityProvider,omitempty"`

	// Evidence is the submission note the owner published, word for word,
	// when accepting it as verified. Never set by an agent.
	Evidence string `json:"evidence,omitempty"`
}

// Closed vocabularies (seed 004).
var (
	// MerchantPreconditions are the steps a merchant checkout needs first.
	MerchantPreconditions = []string{"delivery_location", "region_select", "account_required"}
	// SignupPreconditions are the steps a signup form needs first.
	SignupPreconditions = []string{"region_select", "consent_gate", "mode_toggle"}
	// OwnerStepKinds are what the owner does after a signup submit.
	OwnerStepKinds = []string{"email_code", "sms_code", "captcha", "email_link"}
)

// Bounds on what a recipe may hold: a recipe is guidance, not a document.
const (
	MaxRecipeBytes = 32 << 10
	maxHosts       = 20
	maxList        = 30
	maxLine        = 300
	maxProse       = 2000
	maxSelector    = 300
	maxOverrides   = 40
	maxName        = 64
)

// Decode reads a recipe strictly: an unknown field or trailing data is an
// invalid recipe, not something silently dropped.
func Decode(raw []byte) (Recipe, error) {
	var r Recipe
	if len(raw) > MaxRecipeBytes {
		return r, invalid("the recipe is larger than %d KiB", MaxRecipeBytes>>10)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var ute *json.UnmarshalTypeError
		if ok := asType(err, &ute); ok && ute.Field != "" {
			return Recipe{}, invalid("field %s has the wrong type", ute.Field)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Recipe{}, invalid("unknown field %s", f)
		}
		return Recipe{}, invalid("the recipe is not a JSON object of the recipe format")
	}
	if dec.More() {
		return Recipe{}, invalid("the recipe is followed by more data")
	}
	return r, nil
}

func asType(err error, target **json.UnmarshalTypeError) bool {
	e, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = e
	}
	return ok
}

func invalid(format string, args ...any) error {
	return agentvault.Errorf(agentvault.CodeInvalidRecipe, "invalid recipe: "+format, args...)
}

// CheckArgs says whose recipe is checked.
type CheckArgs struct {
	// ByOwner admits what only the owner may write: status verified,
	// evidence, platform recipes.
	ByOwner bool
}

// Check applies the registry's rules to r and returns it normalised (hosts
// canonical, the example URL stripped). Every refusal is invalid_recipe
// with a message that names the rule.
func Check(r Recipe, a CheckArgs) (Recipe, error) {
	switch r.Kind {
	case KindMerchant, KindSignup, KindSignupPlatform:
	case KindPlatform:
		if !a.ByOwner {
			return r, invalid("platform recipes ship with the appliance; submit a merchant, signup or signup-platform recipe")
		}
	case "":
		return r, invalid("kind is required (merchant, signup or signup-platform)")
	default:
		return r, invalid("kind must be merchant, signup or signup-platform")
	}
	switch r.Status {
	case StatusPartial, StatusUnverified, StatusDeadEnd:
	case StatusVerified:
		if !a.ByOwner {
			return r, invalid("status verified is given by the owner only; send partial, unverified or dead-end and set verificationRequested instead")
		}
	case "":
		return r, invalid("status is required (partial, unverified or dead-end)")
	default:
		return r, invalid("status must be partial, unverified or dead-end")
	}
	if r.Evidence != "" && !a.ByOwner {
		return r, invalid("evidence is published by the owner from the submission note; send it as note with verificationRequested")
	}

	// Hosts: canonical, unique, and the id among them for host recipes.
	hosts := make([]string, 0, len(r.Hosts))
	if len(r.Hosts) > maxHosts {
		return r, invalid("at most %d hosts", maxHosts)
	}
	for _, h := range r.Hosts {
		c, err := hostname.Host(h)
		if err != nil || strings.Contains(h, "/") {
			return r, invalid("hosts holds something that is not a host name")
		}
		if slices.Contains(hosts, c) {
			return r, invalid("hosts names %s twice", c)
		}
		hosts = append(hosts, c)
	}
	r.Hosts = hosts
	switch r.Kind {
	case KindMerchant, KindSignup:
		id, err := hostname.Host(r.ID)
		if err != nil || strings.Contains(r.ID, "/") {
			return r, invalid("id is the recipe's primary host, e.g. shop.example.com")
		}
		r.ID = id
		if len(r.Hosts) == 0 {
			r.Hosts = []string{id}
		} else if !slices.Contains(r.Hosts, id) {
			return r, invalid("id %s is not among hosts", id)
		}
	default:
		if !isName(r.ID) {
			return r, invalid("id of a %s recipe is a short lowercase name such as %q", r.Kind, "shopify")
		}
	}
	if r.Kind == KindMerchant && r.Platform == "" {
		return r, invalid("platform is required on a merchant recipe (a platform id, or \"custom\")")
	}
	for name, v := range map[string]string{"platform": r.Platform, "cardSurface": r.CardSurface, "identityProvider": r.IdentityProvider} {
		if v != "" && !isName(v) {
			return r, invalid("%s is a short lowercase name such as %q", name, "shopify")
		}
	}

	// Preconditions: a closed vocabulary per kind, no repeats, and no
	// empty array (omit the field instead).
	if r.Preconditions != nil {
		var vocab []string
		switch r.Kind {
		case KindMerchant:
			vocab = MerchantPreconditions
		case KindSignup, KindSignupPlatform:
			vocab = SignupPreconditions
		default:
			return r, invalid("preconditions belong to merchant and signup recipes")
		}
		if len(r.Preconditions) == 0 {
			return r, invalid("preconditions is empty: omit the field instead")
		}
		seen := map[string]bool{}
		for _, p := range r.Preconditions {
			if !slices.Contains(vocab, p) {
				return r, invalid("precondition %q is not one of %s for a %s recipe", clip(p, 40), strings.Join(vocab, ", "), r.Kind)
			}
			if seen[p] {
				return r, invalid("precondition %s is repeated", p)
			}
			seen[p] = true
		}
	}

	// Dead ends: the status and the classification go together.
	if (r.Status == StatusDeadEnd) != (r.DeadEnd != nil) {
		return r, invalid("status dead-end and a deadEnd classification go together")
	}
	if r.DeadEnd != nil {
		if r.Kind != KindMerchant {
			return r, invalid("deadEnd belongs to merchant recipes")
		}
		if !slices.Contains(DeadEndReasons, r.DeadEnd.Reason) {
			return r, invalid("deadEnd.reason must be one of %s", strings.Join(DeadEndReasons, ", "))
		}
		if err := prose("deadEnd.detail", r.DeadEnd.Detail, maxLine); err != nil {
			return r, err
		}
	}

	// Fields of other kinds.
	if r.Kind != KindPlatform && (len(r.Detection) > 0 || len(r.Steps) > 0 || len(r.Selectors) > 0 || r.Origins != nil) {
		return r, invalid("detection, steps, selectors and origins belong to platform recipes; a merchant names its selectors under overrides")
	}
	if r.Kind != KindSignup && r.Kind != KindSignupPlatform && (len(r.OwnerSteps) > 0 || r.IdentityProvider != "") {
		return r, invalid("ownerSteps and identityProvider belong to signup recipes")
	}
	if r.Kind != KindMerchant && r.Kind != KindPlatform && (len(r.Overrides) > 0 || r.CardSurface != "" || r.ExampleProductURL != "") {
		return r, invalid("overrides, cardSurface and exampleProductUrl belong to merchant recipes")
	}
	for _, s := range r.OwnerSteps {
		if !slices.Contains(OwnerStepKinds, s) {
			return r, invalid("owner step %q is not one of %s", clip(s, 40), strings.Join(OwnerStepKinds, ", "))
		}
	}
	if len(r.OwnerSteps) > maxList {
		return r, invalid("at most %d owner steps", maxList)
	}

	// Selectors.
	for name, m := range map[string]map[string]Target{"overrides": r.Overrides, "selectors": r.Selectors} {
		if len(m) > maxOverrides {
			return r, invalid("at most %d %s", maxOverrides, name)
		}
		for k, t := range m {
			if !isRole(k) {
				return r, invalid("%s keys are short names such as cardNumber or submit", name)
			}
			if err := selector(name+"."+k, t.Selector, true); err != nil {
				return r, err
			}
			if err := selector(name+"."+k+".frame", t.Frame, false); err != nil {
				return r, err
			}
		}
	}

	// Prose: bounded and free of personal data.
	for name, list := range map[string][]string{"gotchas": r.Gotchas, "detection": r.Detection, "steps": r.Steps} {
		if len(list) > maxList {
			return r, invalid("at most %d %s", maxList, name)
		}
		for _, s := range list {
			if strings.TrimSpace(s) == "" {
				return r, invalid("%s holds an empty line", name)
			}
			if err := prose(name, s, maxLine); err != nil {
				return r, err
			}
		}
	}
	if err := prose("notes", r.Notes, maxProse); err != nil {
		return r, err
	}
	if err := prose("evidence", r.Evidence, maxProse); err != nil {
		return r, err
	}

	if r.ExampleProductURL != "" {
		u := StripURL(r.ExampleProductURL)
		h, err := hostname.Host(u)
		if err != nil || !strings.HasPrefix(u, "https://") {
			return r, invalid("exampleProductUrl must be an https:// URL")
		}
		if !slices.Contains(r.Hosts, h) {
			return r, invalid("exampleProductUrl is not on one of the recipe's hosts")
		}
		r.ExampleProductURL = u
	}
	if r.Origins != nil {
		for _, o := range append(slices.Clone(r.Origins.Frames), r.Origins.PostsTo...) {
			if len(o) > maxSelector || hasControl(o) {
				return r, invalid("origins holds an entry that is too long or has control characters")
			}
		}
	}
	if b, err := json.Marshal(r); err != nil || len(b) > MaxRecipeBytes {
		return r, invalid("the recipe is larger than %d KiB", MaxRecipeBytes>>10)
	}
	return r, nil
}

// CheckNote applies the rules of a submission's note: bounded, no personal
// data, and present when verification is requested.
func CheckNote(note string, verificationRequested bool) error {
	if verificationRequested && strings.TrimSpace(note) == "" {
		return invalid("verificationRequested needs note: the sanitized evidence of the purchase or signup")
	}
	return prose("note", note, maxProse)
}

// prose checks free text: bounded, printable, and with nothing shaped like
// personal data (an email, a phone or card number, a token), which a
// recipe never needs and the registry must never publish.
func prose(name, s string, max int) error {
	if len(s) > max {
		return invalid("%s is longer than %d characters", name, max)
	}
	if hasControl(strings.ReplaceAll(s, "\n", " ")) {
		return invalid("%s holds control characters", name)
	}
	if redact.HasSensitiveShape(s) {
		return invalid("%s looks like it holds personal data (an email, a phone or card number, or a token); describe the page, not the buyer", name)
	}
	return nil
}

func selector(name, s string, required bool) error {
	if s == "" {
		if required {
			return invalid("%s needs a selector", name)
		}
		return nil
	}
	if len(s) > maxSelector || hasControl(s) {
		return invalid("%s is too long or has control characters", name)
	}
	if redact.IsRefSelector(s) {
		return invalid("%s is a snapshot ref, which lasts one page load; give a CSS selector", name)
	}
	if redact.HasSensitiveShape(s) {
		return invalid("%s looks like it holds personal data", name)
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' })
}

// isName is a platform or provider id: lowercase letters, digits and
// hyphens, starting with a letter.
func isName(s string) bool {
	if s == "" || len(s) > maxName || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isRole is an override or selector key: a short identifier.
func isRole(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for i, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
