package leakcheck

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"math/big"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// MinLong is the length from which a canary is distinctive enough to be
// looked for as a substring of anything. MinShort is the shortest value a
// check can mean anything for.
const (
	MinLong  = 8
	MinShort = 3
)

// Canary is a value planted for a proof, with the forms a leak of it could
// take.
type Canary struct {
	name  string // "card number", "cvv": what a finding names (never the value)
	value string
	forms []form
}

type form struct {
	how string // "raw", "query", "base64+1": what a finding names
	b   []byte
}

// Value plants value under name. It panics on a value shorter than
// MinShort: nothing can tell such a value from noise.
func Value(name, value string) Canary {
	if len(value) < MinShort {
		panic(fmt.Sprintf("leakcheck: the %s canary has %d bytes; a check needs at least %d", name, len(value), MinShort))
	}
	Plant(value)
	return Canary{name: name, value: value, forms: formsOf(value)}
}

// formsOf lists the encodings of value a check looks for: for a long value
// every form a leak could take, for a short one the forms a whole field
// takes in text (digits come out of every escaping unchanged).
func formsOf(value string) []form {
	var forms []form
	add := func(how, s string) {
		if s == "" {
			return
		}
		for _, f := range forms {
			if string(f.b) == s {
				return
			}
		}
		forms = append(forms, form{how, []byte(s)})
	}
	add("raw", value)
	add("query", url.QueryEscape(value))
	add("path", url.PathEscape(value))
	js, _ := json.Marshal(value)
	add("json", strings.Trim(string(js), `"`))
	add("html", html.EscapeString(value))
	if len(value) < MinLong {
		return forms
	}
	var ent strings.Builder
	for _, r := range value {
		fmt.Fprintf(&ent, "&#%d;", r)
	}
	add("entities", ent.String())
	// base64 of the value inside a longer text depends on its offset modulo
	// 3; the stable middle of each alignment is what would show up.
	for pad := 0; pad < 3; pad++ {
		b := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{0}, pad), value...))
		inner := strings.TrimRight(b[(pad*4+2)/3:], "=")
		if len(inner) > 4 {
			inner = inner[:len(inner)-2]
		}
		if len(inner) >= MinLong {
			add("base64+"+strconv.Itoa(pad), inner)
			add("base64url+"+strconv.Itoa(pad), strings.NewReplacer("+", "-", "/", "_").Replace(inner))
		}
	}
	if isDigits(value) && len(value) >= 12 {
		var groups []string
		for i := 0; i < len(value); i += 4 {
			groups = append(groups, value[i:min(i+4, len(value))])
		}
		add("spaced", strings.Join(groups, " "))
		add("dashed", strings.Join(groups, "-"))
		add("spaced %20", strings.Join(groups, "%20"))
		add("spaced +", strings.Join(groups, "+"))
	}
	return forms
}

// Name is what findings call the canary.
func (c Canary) Name() string { return c.name }

// Short reports whether the canary is checked as a whole field only.
func (c Canary) Short() bool { return len(c.value) < MinLong }

// Forms lists the encodings looked for (for a short canary, those a whole
// field may take).
func (c Canary) Forms() [][]byte {
	out := make([][]byte, len(c.forms))
	for i, f := range c.forms {
		out[i] = f.b
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Digits returns n random decimal digits that are not Common: a short value
// chosen at run time this way cannot meet a status code or a year that the
// run prints anyway.
func Digits(n int) string {
	for {
		var b strings.Builder
		for range n {
			d, err := rand.Int(rand.Reader, big.NewInt(10))
			if err != nil {
				panic("leakcheck: crypto/rand: " + err.Error())
			}
			b.WriteByte(byte('0' + d.Int64()))
		}
		if s := b.String(); !Common(s) {
			return s
		}
	}
}

// CardNumber returns a random card number of n digits that starts with
// prefix and passes the Luhn check, for a long canary a form accepts.
func CardNumber(prefix string, n int) string {
	if len(prefix) >= n {
		panic("leakcheck: CardNumber prefix longer than the number")
	}
	d := []byte(prefix + Digits(n-len(prefix)-1) + "0")
	sum := 0
	for i := n - 2; i >= 0; i-- {
		v := int(d[i] - '0')
		if (n-2-i)%2 == 0 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	d[n-1] = byte('0' + (10-sum%10)%10)
	return string(d)
}

// Common reports whether a short digit string is one programs and pages
// print on their own: a three-digit HTTP status (100-599) or a well-known
// port, a four-digit year (1900-2199). A short canary drawn at run time
// skips these (Digits).
func Common(s string) bool {
	if !isDigits(s) {
		return false
	}
	n, _ := strconv.Atoi(s)
	switch {
	case len(s) == 3 && (n >= 100 && n <= 599 || n == 993 || n == 995):
		return true
	case len(s) == 4 && (n >= 1900 && n <= 2199 || n == 8080 || n == 8443 || n == 3000 || n == 5432):
		return true
	}
	return false
}

// planted holds every value planted in this test binary, so that text quoted
// in a failure message can be cleaned of them (Redact).
var planted sync.Map // value -> struct{}

// Plant registers values for Redact without checking for them.
func Plant(values ...string) {
	for _, v := range values {
		if v != "" {
			planted.Store(v, struct{}{})
		}
	}
}

var longDigits = regexp.MustCompile(`\d[\d -]{10,}\d`)

// Redact returns s with every planted value replaced (a long one in any of
// its forms, a short one where it stands as a whole field), and any long run
// of digits, for quoting page, log or tool text in a
// failure message.
func Redact(s string) string {
	var vals []string
	planted.Range(func(k, _ any) bool {
		vals = append(vals, k.(string))
		return true
	})
	// Longest first, so that a value inside another is not half replaced.
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		for _, f := range formsOf(v) {
			if len(v) >= MinLong {
				s = strings.ReplaceAll(s, string(f.b), "<redacted>")
				continue
			}
			for at := bounded(s, string(f.b)); at >= 0; at = bounded(s, string(f.b)) {
				s = s[:at] + "<redacted>" + s[at+len(f.b):]
			}
		}
	}
	return longDigits.ReplaceAllString(s, "<digits>")
}

// Finding is one canary form found in one sink. It never holds the value.
type Finding struct {
	Sink, Canary, Form string
	At, Of             int // byte offset of the finding in the sink, and the sink's size
}

func (f Finding) String() string {
	return fmt.Sprintf("P11 leak: %s holds the %s (form %s, at byte %d of %d)", f.Sink, f.Canary, f.Form, f.At, f.Of)
}

// Checker looks for a set of canaries in sinks and reports what it found
// through testing.TB. It is safe for concurrent use.
type Checker struct {
	canaries []Canary
	mu       sync.Mutex
	checked  map[string]int // sink -> bytes checked
}

// New returns a checker for the canaries.
func New(cs ...Canary) *Checker {
	return &Checker{canaries: cs, checked: map[string]int{}}
}

// Kind says how a sink is read (see the package doc).
type Kind int

const (
	// Logs: lines of slog JSON or logfmt; other lines are read as Text.
	Logs Kind = iota
	// Answer: a tool or API answer: JSON (string values) or text.
	Answer
	// Text: free text (pages, HTTP bodies and headers, files).
	Text
	// Metrics: the Prometheus text exposition.
	Metrics
	// Binary: images and other bytes no one reads as text; long canaries only.
	Binary
)

var kindNames = [...]string{"logs", "answer", "text", "metrics", "binary"}

func (k Kind) String() string { return kindNames[k] }

// Find lists the canary forms found in data read as kind, without reporting.
func (c *Checker) Find(kind Kind, sink string, data []byte) []Finding {
	c.mu.Lock()
	c.checked[sink] += len(data)
	c.mu.Unlock()
	var out []Finding
	for _, cn := range c.canaries {
		if f, ok := findIn(kind, cn, data); ok {
			f.Sink, f.Canary, f.Of = sink, cn.name, len(data)
			out = append(out, f)
		}
	}
	return out
}

// Check reports every canary found in data read as kind as a test error.
func (c *Checker) Check(t testing.TB, kind Kind, sink string, data []byte) {
	t.Helper()
	for _, f := range c.Find(kind, sink, data) {
		t.Error(f.String())
	}
}

// Logs checks log output (slog JSON or logfmt lines).
func (c *Checker) Logs(t testing.TB, sink string, data []byte) {
	t.Helper()
	c.Check(t, Logs, sink, data)
}

// Answer checks one tool or API answer.
func (c *Checker) Answer(t testing.TB, sink string, data []byte) {
	t.Helper()
	c.Check(t, Answer, sink, data)
}

// Text checks free text: a page, an HTTP body or header block, a file.
func (c *Checker) Text(t testing.TB, sink string, data []byte) {
	t.Helper()
	c.Check(t, Text, sink, data)
}

// Metrics checks a Prometheus text exposition.
func (c *Checker) Metrics(t testing.TB, sink string, data []byte) {
	t.Helper()
	c.Check(t, Metrics, sink, data)
}

// Binary checks bytes that are not text (a screenshot) for the long canaries.
func (c *Checker) Binary(t testing.TB, sink string, data []byte) {
	t.Helper()
	c.Check(t, Binary, sink, data)
}

// Summary lists the sinks checked and their sizes, for the test log.
func (c *Checker) Summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for s, n := range c.checked {
		parts = append(parts, fmt.Sprintf("%s=%dB", s, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
