package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// canary is a real value planted for a proof. Its encodings are the forms a
// leak could take on the way out: raw, URL-encoded, JSON-escaped, HTML
// entities, base64 at every alignment, and a card number grouped by spaces
// or dashes.
type canary struct {
	name  string // "card number", "cvv", "password": what a failure names
	forms [][]byte
}

func newCanary(name, value string) canary {
	c := canary{name: name}
	if name != "" {
		planted.Store(value, struct{}{})
	}
	add := func(s string) {
		if s == "" {
			return
		}
		for _, f := range c.forms {
			if bytes.Equal(f, []byte(s)) {
				return
			}
		}
		c.forms = append(c.forms, []byte(s))
	}
	add(value)
	add(url.QueryEscape(value))
	add(url.PathEscape(value))
	js, _ := json.Marshal(value)
	add(strings.Trim(string(js), `"`))
	add(html.EscapeString(value))
	var ent strings.Builder
	for _, r := range value {
		fmt.Fprintf(&ent, "&#%d;", r)
	}
	add(ent.String())
	// base64 of the value inside a longer text depends on its offset modulo
	// 3; the stable middle of each alignment is what would show up.
	for pad := 0; pad < 3; pad++ {
		b := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{0}, pad), value...))
		inner := b[(pad*4+2)/3:]
		inner = strings.TrimRight(inner, "=")
		if len(inner) > 4 {
			inner = inner[:len(inner)-2]
		}
		if len(inner) >= 8 {
			add(inner)
			add(strings.NewReplacer("+", "-", "/", "_").Replace(inner))
		}
	}
	if isDigits(value) && len(value) >= 12 {
		var sp, da []string
		for i := 0; i < len(value); i += 4 {
			end := min(i+4, len(value))
			sp = append(sp, value[i:end])
		}
		da = sp
		add(strings.Join(sp, " "))
		add(strings.Join(da, "-"))
		add(strings.Join(sp, "%20"))
		add(strings.Join(sp, "+"))
	}
	return c
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// planted holds every canary of this test binary, so that text quoted in a
// failure message can be cleaned of them first.
var planted sync.Map // value -> struct{}

var longDigits = regexp.MustCompile(`\d[\d -]{10,}\d`)

// redacted returns s with every planted value (in any of its forms) and any
// long digit run replaced, for quoting page or tool text in a failure.
func redacted(s string) string {
	planted.Range(func(k, _ any) bool {
		for _, f := range newCanary("", k.(string)).forms {
			s = strings.ReplaceAll(s, string(f), "<redacted>")
		}
		return true
	})
	return longDigits.ReplaceAllString(s, "<digits>")
}

// shortCanary is a canary for a value too short to grep on its own (a CVV):
// only its forms in context count, where it sits as a whole field value.
func shortCanary(name, value string) canary {
	planted.Store(value, struct{}{})
	return canary{name: name, forms: [][]byte{
		[]byte(`"` + value + `"`), []byte(`=` + value + `&`),
		[]byte(`>` + value + `<`), []byte(`'` + value + `'`), []byte(`\"` + value + `\"`),
	}}
}

// leaks checks sinks for canaries. A finding names the sink, the canary and
// the form, never the value.
type leaks struct {
	canaries []canary
	mu       sync.Mutex
	checked  map[string]int // sink -> bytes checked
}

func newLeaks(cs ...canary) *leaks { return &leaks{canaries: cs, checked: map[string]int{}} }

// check reports every canary form found in data.
func (l *leaks) check(t *testing.T, sink string, data []byte) {
	t.Helper()
	l.mu.Lock()
	l.checked[sink] += len(data)
	l.mu.Unlock()
	for _, c := range l.canaries {
		for i, f := range c.forms {
			if at := bytes.Index(data, f); at >= 0 {
				t.Errorf("P11 leak: %s holds the %s (form %d of %d, at byte %d of %d)", sink, c.name, i, len(c.forms), at, len(data))
			}
		}
	}
}

func (l *leaks) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for s, n := range l.checked {
		parts = append(parts, fmt.Sprintf("%s=%dB", s, n))
	}
	return strings.Join(parts, " ")
}

// syncBuffer collects a process's or a logger's output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func TestCanaryFormsAreFound(t *testing.T) {
	num := "4111111111111111"
	c := newCanary("card number", num)
	enc := base64.StdEncoding.EncodeToString([]byte(`{"n":"` + num + `"}`))
	for _, hay := range []string{
		"x" + num + "y", "4111 1111 1111 1111", "4111-1111-1111-1111", "a=4111%201111%201111%201111",
		enc, html.EscapeString(num), "&#52;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;",
	} {
		found := false
		for _, f := range c.forms {
			if bytes.Contains([]byte(hay), f) {
				found = true
			}
		}
		if !found {
			t.Errorf("an encoding of %d bytes went undetected", len(hay))
		}
	}
	pw := newCanary("password", `p@ss"w0rd/+`)
	if !bytes.Contains([]byte(`{"pw":"p@ss\"w0rd/+"}`), pw.forms[3]) {
		t.Error("JSON-escaped password form missing")
	}
}

func TestRedactedHidesPlantedValues(t *testing.T) {
	newCanary("password", "hunter2-Canary!")
	got := redacted(`{"a":"hunter2-Canary!","b":"hunter2-Canary%21","n":"4111 1111 1111 1111"}`)
	if strings.Contains(got, "hunter2") || strings.Contains(got, "4111") {
		t.Errorf("redacted left a value in place (%d bytes)", len(got))
	}
}
