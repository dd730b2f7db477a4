package rewrite

import (
	"bytes"
	"testing"
)

func TestMayWalkMatchesLowerCasing(t *testing.T) {
	ref := func(contentType string, b []byte) bool {
		ct := bytes.ToLower(bytes.TrimSpace([]byte(contentType)))
		for _, p := range []string{"application/x-www-form-urlencoded", "multipart/", "application/json", "text/json", "application/x-ndjson"} {
			if bytes.HasPrefix(ct, []byte(p)) {
				return true
			}
		}
		if mt, _, _ := bytes.Cut(ct, []byte(";")); bytes.HasSuffix(bytes.TrimSpace(mt), []byte("+json")) {
			return true
		}
		t := bytes.TrimLeft(b, " \t\r\n\ufeff")
		return len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == '"')
	}
	for _, ct := range []string{"", "text/html", " Application/JSON; charset=utf-8", "APPLICATION/X-WWW-FORM-URLENCODED",
		"multipart/form-data; boundary=x", "application/vnd.api+JSON ; x=1", "application/jſon", "text/jſon",
		"application/vnd+json", "+json", "json", "İtext/json", "application/x-ndjson", "Multipart/", "text/plain; x=+json"} {
		for _, b := range []string{"", "x", " {", "\ufeff["} {
			if got, want := MayWalk(ct, []byte(b)), ref(ct, []byte(b)); got != want {
				t.Errorf("MayWalk(%q, %q) = %v, want %v", ct, b, got, want)
			}
		}
	}
}

// TestP10_MayWalkCoversEveryWalk: wherever Body walks a body as a form,
// JSON or multipart, MayWalk says so: the response scrub never skips the
// structured pass (a value behind a JSON \u escape) on its word.
func TestP10_MayWalkCoversEveryWalk(t *testing.T) {
	cts := []string{"", "text/html", "text/plain", "application/json", "Application/JSON; charset=utf-8", " application/json",
		"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "MULTIPART/mixed; boundary=y",
		"application/vnd.api+json", "application/vnd.api+JSON ; x=1", "text/json", "application/x-ndjson", "bad;;type",
		"application/json;", "text/plain; x=+json", "application/problem+json;charset=utf-8"}
	bodies := []string{"", "x", "{}", " [1]", "\ufeff{\"a\":1}", "\"s\"", "{not json", "a=b&c=d", "--x\r\n"}
	for _, ct := range cts {
		for _, b := range bodies {
			if k, _ := mediaKind(ct, []byte(b)); k != walkText && !MayWalk(ct, []byte(b)) {
				t.Errorf("Body walks %q as %d, MayWalk(%q) says no", b, k, ct)
			}
		}
	}
}
