package item

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestP11_SecretPrintsRedacted: every way Go prints or encodes a value
// prints REDACTED for a Secret, alone or inside a struct.
func TestP11_SecretPrintsRedacted(t *testing.T) {
	const canary = "4111111111111111"
	s := NewSecret([]byte(canary))
	wrapped := struct{ S Secret }{s}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "s", s)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "s", s)
	js, err := json.Marshal(wrapped)
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", wrapped), "%#v": fmt.Sprintf("%#v", wrapped),
		"%s": fmt.Sprintf("%s", s), "%q": fmt.Sprintf("%q", s), "%x": fmt.Sprintf("%x", s),
		"String": s.String(), "json": string(js), "text": string(text), "slog": logged.String(),
	}
	for how, out := range outputs {
		if strings.Contains(out, canary) || !strings.Contains(out, "REDACTED") {
			t.Errorf("%s printed %q", how, out)
		}
	}
}

func TestSecretCopiesComparesAndWipes(t *testing.T) {
	b := []byte("hunter2")
	s := NewSecret(b)
	b[0] = 'X'
	if string(s.InsecureRawBytes()) != "hunter2" {
		t.Fatal("NewSecret kept the caller's buffer")
	}
	if !s.Equal(NewSecret([]byte("hunter2"))) || s.Equal(NewSecret([]byte("hunter3"))) || s.Equal(NewSecret([]byte("hunter"))) {
		t.Error("Equal")
	}
	s.Wipe()
	if !bytes.Equal(s.InsecureRawBytes(), make([]byte, 7)) {
		t.Error("Wipe left bytes behind")
	}
}
