package botauth

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
)

// jwk is one directory entry: an Ed25519 public key (RFC 8037) with its
// thumbprint as kid (the draft asks for it at the well-known URI) and,
// for a rotated key, exp: when it leaves the directory.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid,omitempty"`
	X   string `json:"x"`
	Use string `json:"use,omitempty"`
	Nbf int64  `json:"nbf,omitempty"`
	Exp int64  `json:"exp,omitempty"`
}

// directorySigValidity is how long the directory's own signatures are
// valid: the draft asks for expires well past any republication interval
// (a verifier that redistributes the keys keeps the proof that long).
const directorySigValidity = 24 * time.Hour

// directoryMaxAge is the Cache-Control max-age: short, so a site sees a
// rotation soon; a site that meets an unknown keyid fetches again anyway.
const directoryMaxAge = 300

// Field is one response header field.
type Field struct{ Name, Value string }

// Directory is the key directory a site fetches at DirectoryPath under the
// agent origin: a JWKS of the published keys, served as DirectoryMediaType.
// When authority (the request's, as the server received it) is the agent
// origin's, each key also signs the response (the draft's possession
// proof: "@authority";req and content-digest, tag TagDirectory), binding
// the key set to that authority; any other authority gets the keys
// unsigned, so the keys cannot be re-served under a name that is not the
// agent's.
func Directory(keys []*Key, authority, agentAuthority string, now time.Time) ([]byte, []Field, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range keys {
		e := k.publicJWK()
		e.Kid, e.Use = k.ID(), "sig"
		if !k.retire.IsZero() {
			e.Exp = k.retire.Unix()
		}
		set.Keys = append(set.Keys, e)
	}
	body, err := json.Marshal(set)
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.CodeInternal, err, "encode the key directory")
	}
	digest := contentDigest(body)
	fields := []Field{
		{"Content-Type", DirectoryMediaType},
		{"Cache-Control", "max-age=" + strconv.Itoa(directoryMaxAge)},
		{"Content-Digest", digest},
	}
	authority = strings.TrimSuffix(strings.ToLower(authority), ":443")
	if authority == "" || authority != strings.TrimSuffix(strings.ToLower(agentAuthority), ":443") {
		return body, fields, nil
	}
	created := now.Unix()
	expires := created + int64(directorySigValidity/time.Second)
	var inputs, sigs []string
	for i, k := range keys {
		label := "binding" + strconv.Itoa(i)
		input, sig, err := directorySignature(k, authority, digest, created, expires)
		if err != nil {
			return nil, nil, err
		}
		inputs = append(inputs, label+"="+input)
		sigs = append(sigs, label+"="+sig)
	}
	if len(inputs) > 0 {
		fields = append(fields, Field{"Signature-Input", strings.Join(inputs, ", ")}, Field{"Signature", strings.Join(sigs, ", ")})
	}
	return body, fields, nil
}

// contentDigest is the Content-Digest field value (RFC 9530) of body.
func contentDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha-256=" + sfBytes(sum[:])
}

// directorySignature is one key's signature over the directory response:
// the Signature-Input member value and the Signature member value.
func directorySignature(k *Key, authority, digest string, created, expires int64) (string, string, error) {
	p := sigParams{
		components: []component{
			{name: "@authority", req: true, value: authority},
			{name: "content-digest", value: digest},
		},
		params: []param{
			intParam("created", created),
			intParam("expires", expires),
			strParam("keyid", k.ID()),
			strParam("tag", TagDirectory),
		},
	}
	base, input, err := p.base()
	if err != nil {
		return "", "", err
	}
	return input, sfBytes(k.sign(base)), nil
}
