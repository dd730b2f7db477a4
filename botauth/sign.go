package botauth

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
)

// Labels of the signatures on a request (the Signature-Input and Signature
// dictionary keys). The Web Bot Auth signature covers the Signature-Agent
// member of its own label, as the draft requires; TAP's covers what Visa's
// specification names (@authority and @path) and is made with the same key,
// so a site finds that key in the same directory.
const (
	labelWebBotAuth = "sig1"
	labelTAP        = "sig2"
	alg             = "ed25519"
	nonceBytes      = 32
)

// SignerConfig configures a Signer.
type SignerConfig struct {
	// AgentOrigin is the https origin sites fetch the key directory from
	// (DirectoryPath under it), sent in every Signature-Agent header.
	AgentOrigin string
	// Window is how long a Web Bot Auth signature is valid; TAP's is this,
	// at most MaxTAPWindow. Zero: DefaultWindow.
	Window time.Duration
	Now    func() time.Time // nil: time.Now
	Rand   io.Reader        // nil: crypto/rand
}

// Signer signs requests for the owner's chosen sites with the keyring's
// key in use. The keyring and the rules change at run time (SetKeys,
// SetRules); a signature is made from one consistent pair.
type Signer struct {
	cfg    SignerConfig
	origin string // AgentOrigin serialised as an sf-string
	state  atomic.Pointer[signerState]
}

type signerState struct {
	keys  *Keyring
	rules Rules
}

// CheckAgentOrigin validates what Signature-Agent names: an https origin
// (scheme, host, optional port; no path, query or user), the draft's
// "directory" member value (the verifier resolves DirectoryPath under it).
func CheckAgentOrigin(o string) error {
	bad := agentvault.Errorf(agentvault.CodeInvalidInput, "the agent origin must be an https origin such as https://agent.example.org (no path): sites fetch %s under it", DirectoryPath)
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return bad
	}
	if _, err := hostname.Parse(u.Host, 443); err != nil {
		return bad
	}
	if _, err := sfString(o); err != nil {
		return bad
	}
	return nil
}

// NewSigner builds a Signer over keys and rules.
func NewSigner(cfg SignerConfig, keys *Keyring, rules Rules) (*Signer, error) {
	cfg.AgentOrigin = strings.TrimSuffix(cfg.AgentOrigin, "/")
	if err := CheckAgentOrigin(cfg.AgentOrigin); err != nil {
		return nil, err
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if err := CheckWindow(cfg.Window); err != nil {
		return nil, err
	}
	if keys == nil || len(keys.keys) == 0 {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "a signer needs a key")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	origin, _ := sfString(cfg.AgentOrigin)
	s := &Signer{cfg: cfg, origin: origin}
	s.state.Store(&signerState{keys: keys, rules: rules})
	return s, nil
}

// AgentOrigin is the origin every Signature-Agent names.
func (s *Signer) AgentOrigin() string { return s.cfg.AgentOrigin }

// Window is the Web Bot Auth signatures' validity.
func (s *Signer) Window() time.Duration { return s.cfg.Window }

// SetKeys makes keys the keyring new signatures come from.
func (s *Signer) SetKeys(keys *Keyring) {
	if keys == nil || len(keys.keys) == 0 {
		return
	}
	st := *s.state.Load()
	st.keys = keys
	s.state.Store(&st)
}

// SetRules makes rules the sites signed from now on.
func (s *Signer) SetRules(r Rules) {
	st := *s.state.Load()
	st.rules = r
	s.state.Store(&st)
}

// Keys is the keyring in use.
func (s *Signer) Keys() *Keyring { return s.state.Load().keys }

// Rules are the chosen sites in use.
func (s *Signer) Rules() Rules { return s.state.Load().rules }

// Request is what a signature covers of an outgoing request, as it goes on
// the wire (after substitution: the signature covers what the site gets).
type Request struct {
	// Host is the destination host, normalised (package hostname): the
	// rules are matched against it.
	Host string
	// Authority is the request's authority as sent (host, and the port
	// when it is not 443), lower case: the @authority value (RFC 9421
	// section 2.2.3).
	Authority string
	// Path is the request target's path as sent, percent-encoding kept:
	// the @path value (section 2.2.6). Empty is "/".
	Path string
	// Payment says the request carries a card the proxy released: it gets
	// TAP's payment tag where the owner turned that on.
	Payment bool
}

// Signed is what goes on the request: the three header fields, and the
// tags and site class for metrics and the audit.
type Signed struct {
	Agent     string // Signature-Agent
	Input     string // Signature-Input
	Signature string // Signature
	Tags      []string
	Class     string
	// Site is the chosen site the request fell under (its host as the
	// owner named it), for the audit.
	Site string
	// KeyID is the signing key's id.
	KeyID string
}

// Sign signs r when its host falls under a chosen site; ok is false (and
// nothing must be added to the request) when it does not.
func (s *Signer) Sign(r Request) (Signed, bool, error) {
	st := s.state.Load()
	site, ok := st.rules.Match(r.Host)
	if !ok {
		return Signed{}, false, nil
	}
	if r.Path == "" {
		r.Path = "/"
	}
	if r.Authority == "" || r.Authority != strings.ToLower(r.Authority) || !strings.HasPrefix(r.Path, "/") {
		return Signed{}, false, agentvault.Errorf(agentvault.CodeMalformedRequest, "the request's authority or path cannot be signed")
	}
	key := st.keys.Active()
	now := s.cfg.Now()
	created := now.Unix()
	out := Signed{Agent: labelWebBotAuth + "=" + s.origin, Class: site.Class(), Site: site.Host, KeyID: key.ID()}
	var inputs, sigs []string
	for _, tag := range site.tags(r.Payment) {
		label, window := labelWebBotAuth, s.cfg.Window
		comps := []component{{name: "@authority", value: r.Authority}, {name: "@path", value: r.Path}}
		if tag == TagWebBotAuth {
			comps = append(comps, component{name: "signature-agent", key: labelWebBotAuth, value: s.origin})
		} else {
			label, window = labelTAP, min(window, MaxTAPWindow)
		}
		nonce, err := s.nonce()
		if err != nil {
			return Signed{}, false, err
		}
		p := sigParams{components: comps, params: []param{
			intParam("created", created),
			intParam("expires", created+int64(window/time.Second)),
			strParam("keyid", key.ID()),
			strParam("alg", alg),
			strParam("nonce", nonce),
			strParam("tag", tag),
		}}
		base, input, err := p.base()
		if err != nil {
			return Signed{}, false, err
		}
		inputs = append(inputs, label+"="+input)
		sigs = append(sigs, label+"="+sfBytes(key.sign(base)))
		out.Tags = append(out.Tags, tag)
	}
	out.Input = strings.Join(inputs, ", ")
	out.Signature = strings.Join(sigs, ", ")
	return out, true, nil
}

// nonce is a fresh random value per signature (RFC 9421 section 7.2.2):
// a site that keeps the nonces it saw within the window refuses a replay.
func (s *Signer) nonce() (string, error) {
	b := make([]byte, nonceBytes)
	if _, err := io.ReadFull(s.cfg.Rand, b); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "random source failed")
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
