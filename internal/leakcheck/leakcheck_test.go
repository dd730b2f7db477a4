package leakcheck

import (
	"encoding/base64"
	"fmt"
	"html"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the errors instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestLongFormsFound(t *testing.T) {
	num := "4111111111111111"
	c := New(Value("card number", num))
	enc := base64.StdEncoding.EncodeToString([]byte(`{"n":"` + num + `"}`))
	for _, hay := range []string{
		"x" + num + "y", "4111 1111 1111 1111", "4111-1111-1111-1111", "a=4111%201111%201111%201111", "a=4111+1111+1111+1111",
		enc, base64.URLEncoding.EncodeToString([]byte("ab" + num)), html.EscapeString(num),
		"&#52;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;&#49;",
	} {
		for _, k := range []Kind{Logs, Answer, Text, Metrics, Binary} {
			if len(c.Find(k, "hay", []byte(hay))) == 0 {
				t.Errorf("%v: an encoding of %d bytes went undetected", k, len(hay))
			}
		}
	}
	pw := New(Value("password", `p@ss"w0rd/+&<`))
	for _, hay := range []string{`{"pw":"p@ss\"w0rd/+&\u003c"}`, `pw="p@ss\"w0rd/+&<"`, "pw=p%40ss%22w0rd%2F%2B%26%3C", "p@ss&#34;w0rd/+&amp;&lt;"} {
		if len(pw.Find(Logs, "hay", []byte(hay))) == 0 {
			t.Errorf("password form %q went undetected", hay)
		}
	}
	// A value in a logfmt attribute with an escape slog adds only there.
	uni := New(Value("password", "pässwort\x01x"))
	if len(uni.Find(Logs, "hay", []byte(`msg=x pw="pässwort\x01x"`))) == 0 {
		t.Error("a Go-quoted logfmt value was not decoded")
	}
}

// TestShortIgnoresMeasurements: the numbers a run writes on its own never
// count as a short canary, wherever they sit.
func TestShortIgnoresMeasurements(t *testing.T) {
	c := New(Value("cvv", "737"))
	for _, tc := range []struct {
		kind Kind
		text string
	}{
		{Logs, "time=2026-12-01T23:09:18.737Z level=INFO msg=tool tool=open_page status=ok ms=737"},
		{Logs, `time=2026-12-01T23:09:18.095Z level=INFO msg=x dur=1.737ms upstream=737µs total=2m0.737s n=-737 f=7.37e+02`},
		{Logs, `{"time":"2026-12-01T23:09:18.737Z","level":"INFO","msg":"request","status":737,"dur":737000000,"bytes":737}`},
		{Logs, `{"msg":"x","host":"127.0.0.1:41737","session":"s_737abc","id":"5f3e-737-ab","at":"12:07:37","sum":"1,737"}`},
		{Logs, `msg="listening" addr=127.0.0.1:7370 url=http://127.0.0.1:41737/mcp`},
		{Logs, "[1201/230918.737:ERROR:gpu_init.cc(737)] ms=737"},
		{Answer, `{"status":"ok","count":737,"visible":737}`},
		{Answer, `{"data":"` + strings.Repeat("AbC/", 20) + `737+` + strings.Repeat("xYz+", 20) + `","type":"image"}`},
		{Answer, "status=ok filled=4/4\nOpened https://127.0.0.1:41737/checkout\nTotal: EUR 1,737.00 (737s so far)"},
		{Metrics, "# HELP x_seconds 737 of them\nx_seconds_bucket{le=\"737\"} 737\nx{quantile=\"0.737\"} 737\ny_total{code=\"ok\"} 737"},
		{Text, "took 737 ms, ms=737 at 1.737s"},
		{Binary, `"737" =737&`},
	} {
		if f := c.Find(tc.kind, "sink", []byte(tc.text)); len(f) > 0 {
			t.Errorf("%v %q: found %v", tc.kind, tc.text, f)
		}
	}
}

// TestShortFoundWhereItLeaks: a short value as page or request data is found.
func TestShortFoundWhereItLeaks(t *testing.T) {
	c := New(Value("cvv", "737"))
	for _, tc := range []struct {
		kind Kind
		text string
	}{
		{Logs, `{"msg":"request","body":"number=4242&cvc=737&exp=12"}`},
		{Logs, `{"msg":"request","form":{"cvc":"737"}}`},
		{Logs, `{"msg":"x","cvc":"737"}`},
		{Logs, `time=2026-12-01T23:09:18.095Z level=INFO msg="typed 737 into the field"`},
		{Logs, `level=WARN msg=x url="https://pay.test/x?cvc=737"`},
		{Logs, `level=WARN msg=x path=/pay?cvc=737&a=1`},
		{Logs, "a line from elsewhere \"737\" with it"},
		{Answer, `{"status":"ok","value":"737"}`},
		{Answer, `{"errorText":["your code 737 is wrong"]}`},
		{Answer, "status=ok\n- textbox \"CVC\" [ref=e3]: 737\n"},
		{Metrics, `x_total{value="737"} 1`},
		{Text, `<input value="737">`},
		{Text, "<td>737</td>"},
		{Text, "cc=4242&cvc=737&x=1"},
		{Text, "cc=4242&cvc=737"},
		{Text, "CVC\n737\nPay"},
		{Text, "--b\r\nContent-Disposition: form-data; name=\"cvc\"\r\n\r\n737\r\n--b--"},
	} {
		if f := c.Find(tc.kind, "sink", []byte(tc.text)); len(f) == 0 {
			t.Errorf("%v %q: the value went undetected", tc.kind, tc.text)
		}
	}
}

func TestBounded(t *testing.T) {
	for s, want := range map[string]bool{
		"737": true, "a 737.": true, "x=737&": true, "(737)": true, "737-": true, "-737": true,
		"1737": false, "7371": false, "a737": false, "1.737": false, "737.5": false, "s_737": false, "737_x": false,
		"2026-737": false, "1,737": false, "10:737": false, "cvc:737": true, "a,737": true,
	} {
		if got := bounded(s, "737") >= 0; got != want {
			t.Errorf("bounded(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckReports(t *testing.T) {
	c := New(Value("card number", "4000056655665556"), Value("cvv", "482"))
	r := &recorder{TB: t}
	c.Logs(r, "proxyd logs", []byte(`{"msg":"x","n":"4000056655665556"}`+"\n"+`{"msg":"y","cvc":"482"}`))
	c.Answer(r, "tool answer", []byte(`{"ok":true}`))
	if len(r.errs) != 2 {
		t.Fatalf("want 2 findings, got %q", r.errs)
	}
	for _, e := range r.errs {
		if strings.Contains(e, "4000056655665556") || !strings.Contains(e, "proxyd logs") {
			t.Errorf("finding %q must name the sink and never the value", e)
		}
	}
	if s := c.Summary(); !strings.Contains(s, "proxyd logs=") || !strings.Contains(s, "tool answer=") {
		t.Errorf("summary %q", s)
	}
}

func TestLogWriter(t *testing.T) {
	c := New(Value("card number", "4000056655665556"), Value("cvv", "482"))
	w := c.LogWriter("replica logs")
	line := `{"msg":"x","n":"4000056655665556"}` + "\n"
	for i := 0; i < len(line); i += 5 {
		_, _ = w.Write([]byte(line[i:min(i+5, len(line))]))
	}
	_, _ = w.Write([]byte(`{"msg":"done","ms":482}` + "\n"))
	r := &recorder{TB: t}
	w.Check(r)
	if len(r.errs) != 1 || w.Lines() != 2 {
		t.Fatalf("lines %d, findings %q", w.Lines(), r.errs)
	}
	r = &recorder{TB: t}
	c.LogWriter("silent").Check(r)
	if len(r.errs) != 1 {
		t.Fatalf("a writer that saw no line must fail: %q", r.errs)
	}
}

func TestRedact(t *testing.T) {
	Value("password", "hunter2-Canary!")
	got := Redact(`{"a":"hunter2-Canary!","b":"hunter2-Canary%21","n":"4111 1111 1111 1111"}`)
	if strings.Contains(got, "hunter2") || strings.Contains(got, "4111") {
		t.Errorf("Redact left a value in place (%d bytes)", len(got))
	}
	Value("cvv", "917")
	if got := Redact(`cvc=917&ms=1917`); got != `cvc=<redacted>&ms=1917` {
		t.Errorf("Redact of a short value: %q", got)
	}
}

func TestValueRefusesTooShort(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a two-byte canary was accepted")
		}
	}()
	Value("pin", "12")
}

func TestDigits(t *testing.T) {
	for range 2000 {
		if d := Digits(3); len(d) != 3 || !isDigits(d) || Common(d) {
			t.Fatalf("Digits(3) = %q", d)
		}
	}
	for _, s := range []string{"200", "404", "599", "2030", "8080"} {
		if !Common(s) {
			t.Errorf("%s is common", s)
		}
	}
}

func TestCardNumber(t *testing.T) {
	for range 200 {
		n := CardNumber("424242", 16)
		sum := 0
		for i := len(n) - 1; i >= 0; i-- {
			v := int(n[i] - '0')
			if (len(n)-1-i)%2 == 1 {
				v *= 2
				if v > 9 {
					v -= 9
				}
			}
			sum += v
		}
		if len(n) != 16 || !strings.HasPrefix(n, "424242") || sum%10 != 0 {
			t.Fatalf("CardNumber = %q (Luhn sum %d)", n, sum)
		}
	}
}
