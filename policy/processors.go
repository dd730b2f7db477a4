package policy

import (
	_ "embed"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault/hostname"

	"github.com/agentvault/agentvault"
	"gopkg.in/yaml.v3"
)

// Integration is one payment integration: how its card frame is recognised
// and where that frame sends the card. It is data (processors.yaml), so the
// owner can read the list and extend it (policy.payment_integrations in
// proxyd's config) without a new release.
type Integration struct {
	// Name identifies the integration; an owner entry with a shipped name
	// replaces the shipped entry.
	Name string `yaml:"name" json:"name"`
	// Frames are host[:port]/path patterns of the card frame's URL (see
	// processors.yaml for the grammar).
	Frames []string `yaml:"frames" json:"frames"`
	// PostsTo are the exact https origins the frame posts the card to, in
	// canonical form once validated ("https://api.stripe.com",
	// "https://api.pay.test:8443").
	PostsTo []string `yaml:"posts_to" json:"posts_to,omitempty"`
	// ClientSideEncryption is true when the frame encrypts the card in its
	// own script before it leaves the browser: wire substitution cannot
	// work there, and mcpd refuses the fill before typing.
	ClientSideEncryption bool `yaml:"client_side_encryption" json:"client_side_encryption,omitempty"`

	frames []framePattern
}

// framePattern is one compiled Frames entry.
type framePattern struct {
	host []string // labels; a label may hold one '*' (leftmost label only)
	port int      // 0: any port (the host name decides who serves the frame)
	path []string // segments; a segment may hold '*'
}

//go:embed processors.yaml
var processorsYAML []byte

// shipped is the validated embedded list. The public-suffix half of the
// validation needs a SiteFunc policy does not own; processors_test runs it
// with golang.org/x/net/publicsuffix.
var shipped = mustShipped()

func mustShipped() *Integrations {
	var list []Integration
	if err := yaml.Unmarshal(processorsYAML, &list); err != nil {
		panic("policy: embedded processors.yaml does not parse: " + err.Error())
	}
	s, err := compileIntegrations(list, nil)
	if err != nil {
		panic("policy: embedded processors.yaml is invalid: " + err.Error())
	}
	return s
}

// Integrations is a validated list of payment integrations, safe for
// concurrent use (it is never modified after it is built).
type Integrations struct {
	list []Integration
}

// ShippedIntegrations is the list agentvault ships (processors.yaml).
func ShippedIntegrations() *Integrations { return shipped }

// PaymentIntegration reports the shipped integration whose card frame
// frameURL is. mcpd uses it to refuse client-side-encryption frames before
// it types anything.
func PaymentIntegration(frameURL string) (Integration, bool) {
	return shipped.Match(frameURL)
}

// List returns a copy of the integrations, owner entries first.
func (s *Integrations) List() []Integration {
	out := make([]Integration, len(s.list))
	for i, in := range s.list {
		out[i] = in.clone()
	}
	return out
}

// Match returns the first integration with a frame pattern matching
// frameURL. Only https frame URLs match; the query and fragment are ignored.
func (s *Integrations) Match(frameURL string) (Integration, bool) {
	host, port, segs, ok := splitFrameURL(frameURL)
	if !ok {
		return Integration{}, false
	}
	for _, in := range s.list {
		for _, p := range in.frames {
			if p.matches(host, port, segs) {
				return in.clone(), true
			}
		}
	}
	return Integration{}, false
}

// MergeIntegrations validates the owner's entries and merges them over the
// shipped list: an entry whose name matches a shipped one replaces it, the
// others are added; owner entries are matched first. siteOf finds a host's
// registrable domain (proxyd passes publicsuffix.EffectiveTLDPlusOne); it is
// how a pattern on a public suffix ("*.co.uk", "*.test") is refused.
func MergeIntegrations(owner []Integration, siteOf SiteFunc) (*Integrations, error) {
	if siteOf == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "payment integrations: no public suffix lookup")
	}
	mine, err := compileIntegrations(owner, siteOf)
	if err != nil {
		return nil, err
	}
	merged := append([]Integration(nil), mine.list...)
	for _, in := range shipped.list {
		replaced := false
		for _, o := range mine.list {
			replaced = replaced || strings.EqualFold(o.Name, in.Name)
		}
		if !replaced {
			merged = append(merged, in)
		}
	}
	return &Integrations{list: merged}, nil
}

// ValidateIntegrations checks a list the way MergeIntegrations does, without
// merging (processors_test runs it over the shipped list).
// TrustedIntegrations compiles a list another process already validated
// and merged (proxyd's, read by mcpd over the control API), the way the
// shipped list is compiled.
func TrustedIntegrations(list []Integration) (*Integrations, error) {
	return compileIntegrations(list, nil)
}

func ValidateIntegrations(list []Integration, siteOf SiteFunc) error {
	if siteOf == nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "payment integrations: no public suffix lookup")
	}
	_, err := compileIntegrations(list, siteOf)
	return err
}

func compileIntegrations(list []Integration, siteOf SiteFunc) (*Integrations, error) {
	bad := func(name, f string, a ...any) error {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "payment integration %q: "+f, append([]any{name}, a...)...)
	}
	seen := map[string]bool{}
	out := make([]Integration, 0, len(list))
	for _, in := range list {
		name := strings.TrimSpace(in.Name)
		if name == "" || len(name) > 64 || strings.ContainsAny(name, "\n\r\t") {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "payment integration: name must be 1 to 64 characters on one line")
		}
		if seen[strings.ToLower(name)] {
			return nil, bad(name, "listed twice")
		}
		seen[strings.ToLower(name)] = true
		if len(in.Frames) == 0 {
			return nil, bad(name, "frames is empty: say which frame URLs hold its card fields")
		}
		c := Integration{Name: name, ClientSideEncryption: in.ClientSideEncryption}
		for _, f := range in.Frames {
			p, err := parseFramePattern(f, siteOf)
			if err != nil {
				return nil, bad(name, "frame %q: %s", f, err)
			}
			c.Frames = append(c.Frames, f)
			c.frames = append(c.frames, p)
		}
		for _, o := range in.PostsTo {
			canon, err := parseOrigin(o, siteOf)
			if err != nil {
				return nil, bad(name, "posts_to %q: %s", o, err)
			}
			c.PostsTo = append(c.PostsTo, canon)
		}
		out = append(out, c)
	}
	return &Integrations{list: out}, nil
}

func (in Integration) clone() Integration {
	in.Frames = append([]string(nil), in.Frames...)
	in.PostsTo = append([]string(nil), in.PostsTo...)
	in.frames = append([]framePattern(nil), in.frames...)
	return in
}

// PostsToOrigin reports whether origin (any form CanonicalOrigin accepts) is
// one the integration posts the card to.
func (in Integration) PostsToOrigin(origin string) bool {
	c, err := CanonicalOrigin(origin)
	if err != nil {
		return false
	}
	for _, o := range in.PostsTo {
		if o == c {
			return true
		}
	}
	return false
}

// CanonicalOrigin is the one spelling of an https origin the list uses:
// "https://host" for port 443, "https://host:port" otherwise, lower case,
// no trailing dot, no path. Anything else (another scheme, a path, user
// info, a non-ASCII host) is an error.
func CanonicalOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return "", fmt.Errorf("not a URL")
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("only https origins carry a card")
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("an origin is scheme, host and port only")
	}
	o, err := hostname.Parse(u.Host, 443)
	if err != nil {
		return "", fmt.Errorf("not a valid host")
	}
	host, port := o.Host, o.Port
	if hostname.IsIP(host) {
		return "", fmt.Errorf("an integration origin is a host name, not an IP address")
	}
	if port == 443 {
		return "https://" + host, nil
	}
	return "https://" + host + ":" + strconv.Itoa(port), nil
}

func parseOrigin(o string, siteOf SiteFunc) (string, error) {
	if strings.Contains(o, "*") {
		return "", fmt.Errorf("posts_to takes exact origins, no wildcards")
	}
	c, err := CanonicalOrigin(o)
	if err != nil {
		return "", err
	}
	if siteOf != nil {
		u, _ := url.Parse(c)
		if _, err := siteOf(u.Hostname()); err != nil {
			return "", fmt.Errorf("the host is a public suffix, not a site")
		}
	}
	return c, nil
}

func parseFramePattern(f string, siteOf SiteFunc) (framePattern, error) {
	s := strings.TrimPrefix(f, "https://")
	if strings.Contains(s, "://") {
		return framePattern{}, fmt.Errorf("only https frames hold card fields")
	}
	if strings.ContainsAny(s, "?#@ \\") {
		return framePattern{}, fmt.Errorf("a frame pattern is host[:port]/path, with no query, fragment or user info")
	}
	hostport, path, ok := strings.Cut(s, "/")
	if !ok || path == "" {
		return framePattern{}, fmt.Errorf("a frame pattern needs a path (host/path)")
	}
	host, port := hostport, 0
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		n, err := portOf(p)
		if err != nil || p == "" {
			return framePattern{}, fmt.Errorf("bad port")
		}
		host, port = h, n
	}
	// normalHost refuses '*', so check the host with the wildcard replaced.
	if strings.Count(host, "*") > 1 {
		return framePattern{}, fmt.Errorf("at most one '*' in the host")
	}
	norm, err := normalHost(strings.Replace(host, "*", "x", 1))
	if err != nil {
		return framePattern{}, err
	}
	if hostname.IsIP(norm) {
		// A payment integration is a vendor's named service: its entries
		// name hosts, never an address (unlike a site an owner names,
		// hostname.Site).
		return framePattern{}, fmt.Errorf("a frame host is a name, not an IP address")
	}
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(host, ".")), ".")
	for i, l := range labels {
		if strings.Contains(l, "*") && i != 0 {
			return framePattern{}, fmt.Errorf("a '*' may only stand in the leftmost host label")
		}
	}
	if len(labels) < 2 {
		return framePattern{}, fmt.Errorf("the host is a public suffix, not a site")
	}
	if siteOf != nil {
		// The wildcard label must sit above a registrable domain; an exact
		// host must not be a public suffix itself.
		check := norm
		if strings.Contains(labels[0], "*") {
			check = strings.Join(labels[1:], ".")
		}
		if _, err := siteOf(check); err != nil {
			return framePattern{}, fmt.Errorf("the host is on a public suffix, wider than one site")
		}
	}
	segs := strings.Split(path, "/")
	for _, sg := range segs {
		if strings.Count(sg, "*") > 1 {
			return framePattern{}, fmt.Errorf("at most one '*' per path segment")
		}
	}
	return framePattern{host: labels, port: port, path: segs}, nil
}

// normalHost is the pattern's host through the one normaliser (package
// hostname); patterns are written in punycode, as browsers report frame
// URLs, so a name that is not already in its canonical ASCII form is
// refused rather than guessed at.
func normalHost(h string) (string, error) {
	n, err := hostname.Bare(h)
	if err != nil || n != strings.ToLower(strings.TrimSuffix(h, ".")) {
		return "", fmt.Errorf("host names are ASCII letters, digits and '-' (punycode for others)")
	}
	return n, nil
}

func portOf(p string) (int, error) {
	if p == "" {
		return 443, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port")
	}
	return n, nil
}

// splitFrameURL breaks an https URL into the parts patterns match on.
func splitFrameURL(frameURL string) (host string, port int, segs []string, ok bool) {
	u, err := url.Parse(frameURL)
	if err != nil || u.Scheme != "https" || u.User != nil {
		return "", 0, nil, false
	}
	o, err := hostname.Parse(u.Host, 443)
	if err != nil {
		return "", 0, nil, false
	}
	host, port = o.Host, o.Port
	p := u.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		return "", 0, nil, false
	}
	return host, port, strings.Split(p[1:], "/"), true
}

func (p framePattern) matches(host string, port int, segs []string) bool {
	if (p.port != 0 && port != p.port) || len(segs) != len(p.path) {
		return false
	}
	labels := strings.Split(host, ".")
	if len(labels) != len(p.host) {
		return false
	}
	for i := range labels {
		if !globOne(p.host[i], labels[i]) {
			return false
		}
	}
	for i := range segs {
		if !globOne(p.path[i], segs[i]) {
			return false
		}
	}
	return true
}

// globOne matches s against a pattern holding at most one '*', which
// stands for any run of characters (the callers have split on '.' or '/'
// already, so it never crosses a label or a segment). A bare "*" label
// must match a non-empty label.
func globOne(pattern, s string) bool {
	pre, post, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == s
	}
	return len(s) >= len(pre)+len(post) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, post) && (pattern != "*" || s != "")
}
