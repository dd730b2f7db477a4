package botauth

import (
	"slices"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
)

// Tags of the signatures botauth makes (the "tag" parameter, RFC 9421
// section 2.3), each a closed label for metrics and audit records.
const (
	// TagWebBotAuth marks the Web Bot Auth signature every chosen site gets.
	TagWebBotAuth = "web-bot-auth"
	// TagTAPBrowse and TagTAPPay are Visa Trusted Agent Protocol's: an agent
	// browsing a merchant, and an agent paying one.
	TagTAPBrowse = "agent-browser-auth"
	TagTAPPay    = "agent-payer-auth"
	// TagDirectory marks the directory's own signatures (the draft's
	// possession proof on the directory response).
	TagDirectory = "http-message-signatures-directory"
)

// Tags lists the request tags, for pre-created metric series.
var Tags = []string{TagWebBotAuth, TagTAPBrowse, TagTAPPay}

// Where a site fetches the keys from, and what it is served as.
const (
	DirectoryPath      = "/.well-known/http-message-signatures-directory"
	DirectoryMediaType = "application/http-message-signatures-directory+json"
)

// Windows. A signature is valid from created to expires; the owner picks
// the Web Bot Auth window, TAP's is that, at most 8 minutes (Visa's rule).
const (
	DefaultWindow = 5 * time.Minute
	MinWindow     = 30 * time.Second
	// MaxWindow is shorter than the draft's 24 hours: a signature covers
	// the authority and path only, so anyone who sees one can replay it on
	// that path until it expires, and a rotated key stays published that
	// long.
	MaxWindow    = time.Hour
	MaxTAPWindow = 8 * time.Minute
	// reloadMargin covers the clock skew between replicas and the time
	// each takes to load a rotated keyring from the store (proxyd reloads
	// every few seconds): a replica may sign with the old key that long
	// after the rotation.
	reloadMargin = time.Minute
)

// RetireAfter is how long a rotated key stays published: the longest
// window a signature it made may have, plus the margin for replicas still
// signing with it until they load the new keyring.
func RetireAfter(window time.Duration) time.Duration {
	return max(window, MaxTAPWindow) + reloadMargin
}

// CheckWindow validates the owner's window.
func CheckWindow(w time.Duration) error {
	if w < MinWindow || w > MaxWindow {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the signature window must be between %s and %s", MinWindow, MaxWindow)
	}
	return nil
}

// TAP uses the owner turns on for a site, each adding Visa's tag to the
// requests of its class.
const (
	TAPBrowse = "browse" // every request that carries no card: agent-browser-auth
	TAPPay    = "pay"    // a request that carries a card the proxy released: agent-payer-auth
)

// Site classes, a closed label for metrics: a site signed with the Web Bot
// Auth signature only, or with TAP's too.
const (
	ClassIdentity = "identity"
	ClassTAP      = "tap"
)

// Classes lists the site classes, for pre-created metric series.
var Classes = []string{ClassIdentity, ClassTAP}

// Site is one site the owner chose to sign requests for: its host (and the
// host's subdomains) and the TAP uses turned on for it.
type Site struct {
	Host string   `json:"host"`
	TAP  []string `json:"tap,omitempty"`
}

// Class is the site's metric label.
func (s Site) Class() string {
	if len(s.TAP) > 0 {
		return ClassTAP
	}
	return ClassIdentity
}

// NormalizeSite canonicalises what the owner typed: the host as package
// hostname reads a site, the TAP uses checked, sorted and without repeats.
func NormalizeSite(s Site) (Site, error) {
	h, err := hostname.Host(s.Host)
	if err != nil {
		return Site{}, agentvault.Errorf(agentvault.CodeInvalidInput, "%q is not a host name", s.Host)
	}
	out := Site{Host: h}
	for _, u := range s.TAP {
		u = strings.ToLower(strings.TrimSpace(u))
		if u != TAPBrowse && u != TAPPay {
			return Site{}, agentvault.Errorf(agentvault.CodeInvalidInput, "TAP use %q is neither %s nor %s", u, TAPBrowse, TAPPay)
		}
		if !slices.Contains(out.TAP, u) {
			out.TAP = append(out.TAP, u)
		}
	}
	slices.Sort(out.TAP)
	return out, nil
}

// Rules are the sites the owner chose. The zero value signs nothing.
type Rules struct {
	sites []Site // normalised; one entry per host
}

// NewRules merges the owner's lists (the config's and the CLI's): a host
// named twice gets the union of its TAP uses.
func NewRules(lists ...[]Site) (Rules, error) {
	var r Rules
	for _, l := range lists {
		for _, s := range l {
			n, err := NormalizeSite(s)
			if err != nil {
				return Rules{}, err
			}
			i := slices.IndexFunc(r.sites, func(x Site) bool { return x.Host == n.Host })
			if i < 0 {
				r.sites = append(r.sites, n)
				continue
			}
			merged, _ := NormalizeSite(Site{Host: n.Host, TAP: append(slices.Clone(r.sites[i].TAP), n.TAP...)})
			r.sites[i] = merged
		}
	}
	slices.SortFunc(r.sites, func(a, b Site) int { return strings.Compare(a.Host, b.Host) })
	return r, nil
}

// Sites lists the chosen sites, sorted by host.
func (r Rules) Sites() []Site { return slices.Clone(r.sites) }

// Match finds the site a destination host falls under: the host itself or
// a parent the owner named (the most specific one). A host no site covers
// gets no signature.
func (r Rules) Match(host string) (Site, bool) {
	best, found := Site{}, false
	for _, s := range r.sites {
		if hostname.Under(host, s.Host) && (!found || len(s.Host) > len(best.Host)) {
			best, found = s, true
		}
	}
	return best, found
}

// tags are the tags a request to site gets: Web Bot Auth always, and TAP's
// tag for the request's class when the owner turned that use on.
func (s Site) tags(payment bool) []string {
	tags := []string{TagWebBotAuth}
	switch {
	case payment && slices.Contains(s.TAP, TAPPay):
		tags = append(tags, TagTAPPay)
	case !payment && slices.Contains(s.TAP, TAPBrowse):
		tags = append(tags, TagTAPBrowse)
	}
	return tags
}
