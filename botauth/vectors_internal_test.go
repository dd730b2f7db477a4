package botauth

import (
	"encoding/base64"
	"testing"
	"time"
)

// rfc9421Ed25519Seed is the private key of RFC 9421 appendix B.1.4
// ("test-key-ed25519"), the key of the Web Bot Auth draft's vectors: the
// last 32 bytes of its PKCS#8 encoding. A test key: never for use.
func rfc9421Ed25519Seed(t *testing.T) []byte {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString("MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF")
	if err != nil || len(der) != 48 {
		t.Fatal("bad test key")
	}
	return der[16:]
}

// TestThumbprintVectors: RFC 8037 appendix A.3's thumbprint, and the
// draft's keyid of the RFC 9421 test key.
func TestThumbprintVectors(t *testing.T) {
	x, _ := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if got := Thumbprint(x); got != "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" {
		t.Errorf("RFC 8037 A.3 thumbprint = %s", got)
	}
	k, err := newKey(rfc9421Ed25519Seed(t), time.Unix(0, 0), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if k.ID() != "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U" {
		t.Errorf("RFC 9421 test key id = %s", k.ID())
	}
	if got := b64url(k.Public()); got != "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs" {
		t.Errorf("RFC 9421 test key x = %s", got)
	}
}

// TestDraftVectorWebBotAuth rebuilds the draft's Ed25519 example with a
// dictionary Signature-Agent ("Signature-Agent Included Present on the
// Request"): the same base, byte for byte, and (Ed25519 being
// deterministic) the same signature.
func TestDraftVectorWebBotAuth(t *testing.T) {
	k, _ := newKey(rfc9421Ed25519Seed(t), time.Unix(0, 0), time.Time{})
	agent, _ := sfString("https://signature-agent.test")
	p := sigParams{
		components: []component{
			{name: "@authority", value: "example.com"},
			{name: "signature-agent", key: "agent2", value: agent},
		},
		params: []param{
			intParam("created", 1735689600),
			strParam("keyid", k.ID()),
			strParam("alg", "ed25519"),
			intParam("expires", 4889289600),
			strParam("nonce", "n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA=="),
			strParam("tag", "web-bot-auth"),
		},
	}
	base, input, err := p.base()
	if err != nil {
		t.Fatal(err)
	}
	wantInput := `("@authority" "signature-agent";key="agent2");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth"`
	wantBase := "\"@authority\": example.com\n" +
		"\"signature-agent\";key=\"agent2\": \"https://signature-agent.test\"\n" +
		"\"@signature-params\": " + wantInput
	if input != wantInput {
		t.Errorf("Signature-Input member:\n got %s\nwant %s", input, wantInput)
	}
	if string(base) != wantBase {
		t.Errorf("signature base:\n got %q\nwant %q", base, wantBase)
	}
	if got := sfBytes(k.sign(base)); got != ":RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==:" {
		t.Errorf("signature = %s", got)
	}
}

// TestDraftVectorDirectory rebuilds the draft's signed directory response:
// the JWKS body, its Content-Digest and the possession proof bound to the
// authority the directory was fetched from.
func TestDraftVectorDirectory(t *testing.T) {
	k, _ := newKey(rfc9421Ed25519Seed(t), time.Unix(0, 0), time.Time{})
	body, fields, err := Directory([]*Key{k}, "", "signature-agent.test", time.Unix(1735689600, 0))
	if err != nil {
		t.Fatal(err)
	}
	wantBody := `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}`
	if string(body) != wantBody {
		t.Errorf("directory body:\n got %s\nwant %s", body, wantBody)
	}
	digest := contentDigest(body)
	if digest != "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:" {
		t.Errorf("Content-Digest = %s", digest)
	}
	if len(fields) != 3 {
		t.Errorf("a directory fetched under another authority must go out unsigned: %v", fields)
	}
	input, sig, err := directorySignature(k, "signature-agent.test", digest, 1735689600, 4889289600)
	if err != nil {
		t.Fatal(err)
	}
	if want := `("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory"`; input != want {
		t.Errorf("directory Signature-Input:\n got %s\nwant %s", input, want)
	}
	if sig != ":l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:" {
		t.Errorf("directory signature = %s", sig)
	}
}

func TestBaseRefusesLineBreaks(t *testing.T) {
	for _, v := range []string{"/a\nb", "/a\rb", "/a\x00", "/\x7f", "/é"} {
		p := sigParams{components: []component{{name: "@path", value: v}}}
		if _, _, err := p.base(); err == nil {
			t.Errorf("a component value %q was signed", v)
		}
	}
	p := sigParams{components: []component{{name: "@path", value: "/a"}, {name: "@path", value: "/b"}}}
	if _, _, err := p.base(); err == nil {
		t.Error("a component listed twice was signed")
	}
}

func TestSFString(t *testing.T) {
	for in, want := range map[string]string{`a`: `"a"`, `a"b`: `"a\"b"`, `a\b`: `"a\\b"`, ``: `""`} {
		if got, err := sfString(in); err != nil || got != want {
			t.Errorf("sfString(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"\n", "é", "\x7f", "\t"} {
		if _, err := sfString(bad); err == nil {
			t.Errorf("sfString(%q) accepted", bad)
		}
	}
}
