package httpsigtest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Tags a site acts on.
const (
	TagWebBotAuth = "web-bot-auth"
	TagTAPBrowse  = "agent-browser-auth"
	TagTAPPay     = "agent-payer-auth"
	tagDirectory  = "http-message-signatures-directory"

	wellKnown  = "/.well-known/http-message-signatures-directory"
	mediaType  = "application/http-message-signatures-directory+json"
	maxDirBody = 64 << 10
	maxDirKeys = 16
)

// Windows the site accepts: the draft recommends at most a day for Web Bot
// Auth; Visa's TAP allows at most 8 minutes.
const (
	maxWBAWindow = 24 * time.Hour
	maxTAPWindow = 8 * time.Minute
)

// Verifier is a site's check of signed requests. Its zero value is not
// usable: set Client (which trusts the directory's certificate and dials
// nothing but the test's listeners).
type Verifier struct {
	// Client fetches key directories. It must not follow redirects (the
	// draft forbids it); Verifier refuses them itself too.
	Client *http.Client
	// Now is the site's clock; nil is time.Now.
	Now func() time.Time
	// Skew is how far in the future a created time may be.
	Skew time.Duration

	mu      sync.Mutex
	dirs    map[string]*Directory // by origin
	nonces  map[string]int64      // keyid+nonce -> expires
	fetches int
}

// Signature is one verified signature.
type Signature struct {
	Label      string
	Tag        string
	KeyID      string
	Agent      string // the directory origin the key came from
	Components []string
	Created    int64
	Expires    int64
	Nonce      string
}

// Covers reports whether the signature covers the component identifier
// (as serialised: `"@path"`, `"signature-agent";key="sig1"`).
func (s Signature) Covers(id string) bool { return slices.Contains(s.Components, id) }

// Message is what a site knows of a request: its method, the authority it
// was addressed to, the request target as received (path and query) and
// the header fields.
type Message struct {
	Method     string
	Authority  string
	RequestURI string
	Header     http.Header
}

// FromRequest is the message of a request a server received.
func FromRequest(r *http.Request) Message {
	return Message{Method: r.Method, Authority: r.Host, RequestURI: r.RequestURI, Header: r.Header}
}

// Signed reports whether a message carries any signature field at all.
func Signed(h http.Header) bool {
	return h.Get("Signature") != "" || h.Get("Signature-Input") != "" || h.Get("Signature-Agent") != ""
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Fetches is how many directory fetches the verifier made.
func (v *Verifier) Fetches() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// Verify checks every signature on m (RFC 9421 section 3.2) with the
// policy of the Web Bot Auth draft and Visa's TAP: a Web Bot Auth
// signature covering the authority and its own Signature-Agent member, the
// key found by keyid in the directory that member names (fetched and its
// own signatures checked), the window, a nonce not seen before; TAP
// signatures covering authority and path, with a nonce, within 8 minutes,
// made with a key of that same directory. Every signature must verify.
func (v *Verifier) Verify(ctx context.Context, m Message) ([]Signature, error) {
	inputs, err := ParseDictionary(strings.Join(m.Header.Values("Signature-Input"), ", "))
	if err != nil || len(inputs) == 0 {
		return nil, errors.New("no Signature-Input")
	}
	sigs, err := ParseDictionary(strings.Join(m.Header.Values("Signature"), ", "))
	if err != nil {
		return nil, errors.New("Signature does not parse")
	}
	now := v.now()
	var out []Signature
	var agentDir *Directory
	// Web Bot Auth first: it names the directory TAP's keys come from.
	slices.SortStableFunc(inputs, func(a, b Member) int {
		ta, _ := a.Param("tag")
		tb, _ := b.Param("tag")
		wa, wb := ta.Str == TagWebBotAuth, tb.Str == TagWebBotAuth
		switch {
		case wa && !wb:
			return -1
		case wb && !wa:
			return 1
		}
		return 0
	})
	for _, in := range inputs {
		s, base, sigBytes, err := v.parseOne(m, in, sigs, now)
		if err != nil {
			return nil, fmt.Errorf("signature %s: %w", in.Key, err)
		}
		var dir *Directory
		if s.Tag == TagWebBotAuth {
			dir, err = v.directoryFor(ctx, m, s)
			if err != nil {
				return nil, fmt.Errorf("signature %s: %w", in.Key, err)
			}
			agentDir = dir
		} else {
			if agentDir == nil {
				return nil, fmt.Errorf("signature %s: a TAP signature needs the agent's Web Bot Auth signature on the same request to find its key", in.Key)
			}
			dir = agentDir
		}
		pub, ok := dir.key(s.KeyID, now)
		if !ok {
			return nil, fmt.Errorf("signature %s: keyid %s is not in the directory of %s", in.Key, s.KeyID, dir.Origin)
		}
		if !ed25519.Verify(pub, base, sigBytes) {
			return nil, fmt.Errorf("signature %s: does not verify", in.Key)
		}
		s.Agent = dir.Origin
		out = append(out, s)
	}
	if !slices.ContainsFunc(out, func(s Signature) bool { return s.Tag == TagWebBotAuth }) {
		return nil, errors.New("no web-bot-auth signature")
	}
	// Replay (RFC 9421 section 7.2.2): a nonce is good once within its
	// window. Recorded only once every signature verified.
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nonces == nil {
		v.nonces = map[string]int64{}
	}
	for k, exp := range v.nonces {
		if exp < now.Unix() {
			delete(v.nonces, k)
		}
	}
	for _, s := range out {
		if _, seen := v.nonces[s.KeyID+" "+s.Nonce]; seen {
			return nil, fmt.Errorf("signature %s: nonce already used (a replay)", s.Label)
		}
	}
	for _, s := range out {
		v.nonces[s.KeyID+" "+s.Nonce] = s.Expires
	}
	return out, nil
}

// parseOne reads one Signature-Input member, checks its parameters against
// the policy and builds its signature base.
func (v *Verifier) parseOne(m Message, in Member, sigs []Member, now time.Time) (Signature, []byte, []byte, error) {
	s := Signature{Label: in.Key}
	if !in.Inner {
		return s, nil, nil, errors.New("Signature-Input member is not an inner list")
	}
	i := indexMember(sigs, in.Key)
	if i < 0 || sigs[i].Inner || sigs[i].Item.Kind != kindBytes {
		return s, nil, nil, errors.New("no Signature value for the label")
	}
	sigBytes := sigs[i].Item.Bytes
	str := func(k string) string {
		b, ok := in.Param(k)
		if !ok || b.Kind != kindString {
			return ""
		}
		return b.Str
	}
	num := func(k string) (int64, bool) {
		b, ok := in.Param(k)
		return b.Int, ok && b.Kind == kindInteger
	}
	s.Tag, s.KeyID, s.Nonce = str("tag"), str("keyid"), str("nonce")
	if a, ok := in.Param("alg"); ok && (a.Kind != kindString || a.Str != "ed25519") {
		return s, nil, nil, errors.New("alg is not ed25519")
	}
	var okC, okE bool
	s.Created, okC = num("created")
	s.Expires, okE = num("expires")
	if !okC || !okE || s.KeyID == "" {
		return s, nil, nil, errors.New("created, expires and keyid are required")
	}
	if s.Created > now.Add(v.Skew).Unix() {
		return s, nil, nil, errors.New("created in the future")
	}
	if s.Expires <= now.Unix() {
		return s, nil, nil, errors.New("expired")
	}
	if s.Expires <= s.Created {
		return s, nil, nil, errors.New("expires before created")
	}
	for _, it := range in.List {
		if it.Kind != kindString {
			return s, nil, nil, errors.New("a covered component is not a string")
		}
		s.Components = append(s.Components, it.serialize())
	}
	switch s.Tag {
	case TagWebBotAuth:
		if time.Duration(s.Expires-s.Created)*time.Second > maxWBAWindow {
			return s, nil, nil, errors.New("window longer than a day")
		}
		if !s.Covers(`"@authority"`) && !s.Covers(`"@target-uri"`) {
			return s, nil, nil, errors.New("web-bot-auth signature covers neither @authority nor @target-uri")
		}
		if !s.Covers(`"signature-agent";key="` + in.Key + `"`) {
			return s, nil, nil, errors.New("web-bot-auth signature does not cover its own Signature-Agent member")
		}
	case TagTAPBrowse, TagTAPPay:
		if time.Duration(s.Expires-s.Created)*time.Second > maxTAPWindow {
			return s, nil, nil, errors.New("TAP window longer than 8 minutes")
		}
		if !s.Covers(`"@authority"`) || !s.Covers(`"@path"`) || s.Nonce == "" {
			return s, nil, nil, errors.New("TAP signature must cover @authority and @path and carry a nonce")
		}
	default:
		return s, nil, nil, fmt.Errorf("unknown tag %q", s.Tag)
	}
	base, err := signatureBase(m, in)
	return s, base, sigBytes, err
}

// signatureBase is RFC 9421 section 2.5 for a request.
func signatureBase(m Message, in Member) ([]byte, error) {
	var b strings.Builder
	seen := map[string]bool{}
	for _, it := range in.List {
		id := it.serialize()
		if seen[id] {
			return nil, errors.New("component listed twice")
		}
		seen[id] = true
		val, err := componentValue(m, it)
		if err != nil {
			return nil, err
		}
		b.WriteString(id + ": " + val + "\n")
	}
	b.WriteString(`"@signature-params": ` + in.serializeValue())
	return []byte(b.String()), nil
}

// componentValue derives one component (RFC 9421 sections 2.1 and 2.2).
func componentValue(m Message, it Item) (string, error) {
	name := it.Str
	if strings.HasPrefix(name, "@") {
		if len(it.Params) > 0 {
			return "", errors.New("parameters on a derived component are not supported here")
		}
		target := m.RequestURI
		if u, err := url.Parse(target); err == nil && u.IsAbs() {
			target = u.RequestURI() // absolute-form (RFC 9112 section 3.2.2)
		}
		path, _, _ := strings.Cut(target, "?")
		switch name {
		case "@method":
			return m.Method, nil
		case "@authority":
			return authority(m.Authority), nil
		case "@path":
			if path == "" {
				path = "/"
			}
			return path, nil
		case "@target-uri":
			return "https://" + authority(m.Authority) + target, nil
		}
		return "", fmt.Errorf("derived component %s not supported", name)
	}
	if name != strings.ToLower(name) {
		return "", errors.New("field names are lower case in component identifiers")
	}
	vals := m.Header.Values(name)
	if len(vals) == 0 {
		return "", fmt.Errorf("covered field %s is missing", name)
	}
	var key string
	for _, p := range it.Params {
		if p.Key != "key" || p.Val.Kind != kindString {
			return "", fmt.Errorf("component parameter %s not supported", p.Key)
		}
		key = p.Val.Str
	}
	if key == "" {
		for i := range vals {
			vals[i] = strings.Trim(vals[i], " \t")
		}
		return strings.Join(vals, ", "), nil
	}
	d, err := ParseDictionary(strings.Join(vals, ", "))
	if err != nil {
		return "", fmt.Errorf("field %s is not a dictionary", name)
	}
	i := indexMember(d, key)
	if i < 0 {
		return "", fmt.Errorf("field %s has no member %s", name, key)
	}
	return d[i].serializeValue(), nil
}

// authority is @authority's normalisation: lower case, the default port
// dropped.
func authority(a string) string {
	a = strings.ToLower(a)
	if h, p, err := net.SplitHostPort(a); err == nil && p == "443" {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return a
}

// directoryFor resolves the Signature-Agent member s covers: a directory
// origin (type absent or "directory"), fetched when it is not known or
// does not hold s's keyid.
func (v *Verifier) directoryFor(ctx context.Context, m Message, s Signature) (*Directory, error) {
	d, err := ParseDictionary(strings.Join(m.Header.Values("Signature-Agent"), ", "))
	if err != nil {
		return nil, errors.New("Signature-Agent is not a dictionary")
	}
	i := indexMember(d, s.Label)
	if i < 0 || d[i].Inner || d[i].Item.Kind != kindString {
		return nil, errors.New("no Signature-Agent member for the label")
	}
	if t, ok := findParam(d[i].Item.Params, "type"); ok && (t.Kind != kindToken || t.Str != "directory") {
		return nil, errors.New("only the directory type is supported here")
	}
	origin := strings.TrimSuffix(d[i].Item.Str, "/")
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return nil, errors.New("Signature-Agent member is not an https origin")
	}
	v.mu.Lock()
	dir := v.dirs[origin]
	v.mu.Unlock()
	if dir != nil {
		if _, ok := dir.key(s.KeyID, v.now()); ok {
			return dir, nil
		}
	}
	dir, err = v.FetchDirectory(ctx, origin)
	if err != nil {
		return nil, err
	}
	return dir, nil
}

// Directory is a fetched and verified key directory.
type Directory struct {
	Origin string
	// Keys by kid (the thumbprint the verifier computed and matched).
	Keys map[string]ed25519.PublicKey
	// Exp holds the exp of keys that announce one (rotated keys).
	Exp map[string]int64
}

func (d *Directory) key(kid string, now time.Time) (ed25519.PublicKey, bool) {
	k, ok := d.Keys[kid]
	if exp, has := d.Exp[kid]; ok && has && exp <= now.Unix() {
		return nil, false
	}
	return k, ok
}

// FetchDirectory fetches the directory at origin's well-known URI and
// verifies it: 200, the media type, a JWKS of Ed25519 keys whose kid is
// the thumbprint, the Content-Digest of the body and, for every key, its
// signature over the response bound to the authority fetched. It is then
// the verifier's copy for origin.
func (v *Verifier) FetchDirectory(ctx context.Context, origin string) (*Directory, error) {
	v.mu.Lock()
	v.fetches++
	v.mu.Unlock()
	u, err := url.Parse(origin)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+wellKnown, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", mediaType)
	c := *v.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("the directory redirected") }
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the directory: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDirBody+1))
	if err != nil || len(body) > maxDirBody {
		return nil, errors.New("directory body unreadable or too large")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("directory answered %d", resp.StatusCode)
	}
	dir, err := VerifyDirectory(origin, u.Host, resp.Header, body, v.now(), v.Skew)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if v.dirs == nil {
		v.dirs = map[string]*Directory{}
	}
	v.dirs[origin] = dir
	v.mu.Unlock()
	return dir, nil
}

// VerifyDirectory checks a directory response fetched from authority.
func VerifyDirectory(origin, authorityFetched string, h http.Header, body []byte, now time.Time, skew time.Duration) (*Directory, error) {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != mediaType {
		return nil, fmt.Errorf("directory media type %q", h.Get("Content-Type"))
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			Kid string `json:"kid"`
			X   string `json:"x"`
			Exp int64  `json:"exp"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, errors.New("directory is not a JWKS")
	}
	if len(set.Keys) == 0 || len(set.Keys) > maxDirKeys {
		return nil, errors.New("directory has no keys or too many")
	}
	dir := &Directory{Origin: origin, Keys: map[string]ed25519.PublicKey{}, Exp: map[string]int64{}}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			return nil, errors.New("directory key is not Ed25519")
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("directory key x is malformed")
		}
		tp := thumbprint(k.X)
		if k.Kid != "" && k.Kid != tp {
			return nil, errors.New("directory kid is not the key's thumbprint")
		}
		dir.Keys[tp] = ed25519.PublicKey(x)
		if k.Exp != 0 {
			dir.Exp[tp] = k.Exp
		}
	}
	// The possession proof: the body's digest, then one signature per key.
	sum := sha256.Sum256(body)
	wantDigest := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	if h.Get("Content-Digest") != wantDigest {
		return nil, errors.New("directory Content-Digest does not match its body")
	}
	inputs, err := ParseDictionary(strings.Join(h.Values("Signature-Input"), ", "))
	if err != nil || len(inputs) == 0 {
		return nil, errors.New("directory response is not signed")
	}
	sigs, err := ParseDictionary(strings.Join(h.Values("Signature"), ", "))
	if err != nil {
		return nil, errors.New("directory Signature does not parse")
	}
	proven := map[string]bool{}
	for _, in := range inputs {
		tag, _ := in.Param("tag")
		kid, _ := in.Param("keyid")
		created, okC := in.Param("created")
		expires, okE := in.Param("expires")
		if tag.Str != tagDirectory || !in.Inner || !okC || !okE {
			continue
		}
		if created.Int > now.Add(skew).Unix() || expires.Int <= now.Unix() {
			return nil, errors.New("directory signature is from the future or expired")
		}
		pub, ok := dir.Keys[kid.Str]
		i := indexMember(sigs, in.Key)
		if !ok || i < 0 || sigs[i].Item.Kind != kindBytes {
			continue
		}
		var ids []string
		for _, it := range in.List {
			ids = append(ids, it.serialize())
		}
		if !slices.Equal(ids, []string{`"@authority";req`, `"content-digest"`}) {
			return nil, errors.New("directory signature does not cover exactly the request's authority and the content digest")
		}
		base := `"@authority";req: ` + authority(authorityFetched) + "\n" +
			`"content-digest": ` + h.Get("Content-Digest") + "\n" +
			`"@signature-params": ` + in.serializeValue()
		if !ed25519.Verify(pub, []byte(base), sigs[i].Item.Bytes) {
			return nil, fmt.Errorf("directory signature %s does not verify", in.Key)
		}
		proven[kid.Str] = true
	}
	for kid := range dir.Keys {
		if !proven[kid] {
			return nil, fmt.Errorf("directory key %s has no possession proof", kid)
		}
	}
	return dir, nil
}

// thumbprint is RFC 7638's, for an OKP key (RFC 8037 appendix A.3): the
// required members crv, kty and x, in that (lexicographic) order, no
// white space, SHA-256, base64url.
func thumbprint(x string) string {
	canon, _ := json.Marshal(struct {
		Crv string `json:"crv"`
		Kty string `json:"kty"`
		X   string `json:"x"`
	}{"Ed25519", "OKP", x})
	sum := sha256.Sum256(canon)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Thumbprint is the thumbprint of an Ed25519 public key.
func Thumbprint(pub ed25519.PublicKey) string {
	return thumbprint(base64.RawURLEncoding.EncodeToString(pub))
}
