package httpsigtest

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The draft's Ed25519 vectors (draft-meunier-webbotauth-httpsig-protocol,
// "EdDSA Using Curve edwards25519"), made with RFC 9421's test key: the
// verifier must rebuild the same base from the fields alone and accept the
// signature, so it is right before it judges anyone else's.

const testX = "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"

func TestDraftRequestVector(t *testing.T) {
	h := http.Header{}
	h.Set("Signature-Agent", `agent2="https://signature-agent.test"`)
	h.Set("Signature-Input", `sig2=("@authority" "signature-agent";key="agent2");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth"`)
	h.Set("Signature", `sig2=:RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==:`)
	m := Message{Method: "GET", Authority: "example.com", RequestURI: "/", Header: h}
	inputs, err := ParseDictionary(h.Get("Signature-Input"))
	if err != nil || len(inputs) != 1 {
		t.Fatalf("parse: %v", err)
	}
	base, err := signatureBase(m, inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "\"@authority\": example.com\n" +
		"\"signature-agent\";key=\"agent2\": \"https://signature-agent.test\"\n" +
		"\"@signature-params\": " + h.Get("Signature-Input")[len("sig2="):]
	if string(base) != want {
		t.Fatalf("base:\n got %q\nwant %q", base, want)
	}
	x, _ := base64.RawURLEncoding.DecodeString(testX)
	sigs, _ := ParseDictionary(h.Get("Signature"))
	if !ed25519.Verify(x, base, sigs[0].Item.Bytes) {
		t.Error("the draft's signature does not verify")
	}
	if Thumbprint(x) != "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U" {
		t.Error("thumbprint")
	}
}

func TestDraftDirectoryVector(t *testing.T) {
	body := []byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","x":"` + testX + `","use":"sig"}]}`)
	h := http.Header{}
	h.Set("Content-Type", "application/http-message-signatures-directory+json")
	h.Set("Content-Digest", "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:")
	h.Set("Signature-Input", `binding=("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory"`)
	h.Set("Signature", `binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:`)
	now := time.Unix(1735689700, 0)
	d, err := VerifyDirectory("https://signature-agent.test", "signature-agent.test", h, body, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Keys) != 1 {
		t.Errorf("keys %v", d.Keys)
	}
	// Re-served under another authority, the proof fails.
	if _, err := VerifyDirectory("https://copy.test", "copy.test", h, body, now, 0); err == nil {
		t.Error("the proof verified under another authority")
	}
	// A swapped key set fails the digest.
	bad := []byte(strings.Replace(string(body), `"use":"sig"`, `"use":"enc"`, 1))
	if _, err := VerifyDirectory("https://signature-agent.test", "signature-agent.test", h, bad, now, 0); err == nil {
		t.Error("a changed body verified")
	}
	// A proof dated in the future is refused (the draft: like a
	// certificate not yet valid).
	if _, err := VerifyDirectory("https://signature-agent.test", "signature-agent.test", h, body, time.Unix(1735689000, 0), 0); err == nil {
		t.Error("a future-dated proof verified")
	}
}

func TestParseDictionary(t *testing.T) {
	d, err := ParseDictionary(`a=1, b=("x" "y";key="k");p=?0, c;d=tok, e=:AQID:, f="q\"s"`)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 5 || d[1].serializeValue() != `("x" "y";key="k");p=?0` || d[2].Item.Params[0].Val.Str != "tok" || string(d[3].Item.Bytes) != "\x01\x02\x03" || d[4].Item.Str != `q"s` {
		t.Errorf("parsed %+v", d)
	}
	for _, bad := range []string{`A=1`, `a=1,`, `a="x`, `a=(1 2`, `a=:%%:`, `a=1 b=2`, "a=\"\x01\""} {
		if _, err := ParseDictionary(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
