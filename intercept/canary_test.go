package intercept_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

func randPassword() string {
	const chars = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789&<>\"'%+/= "
	var b strings.Builder
	for i := 0; i < 20; i++ {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		b.WriteByte(chars[n.Int64()])
	}
	return "Pw&" + b.String()
}

// TestP11_CanaryNeverInAnyOutput pushes random secrets through every body
// kind, both protocols, echoing upstreams and refusals, then greps every
// sink the proxy writes to (logs, metrics, error bodies, responses, headers)
// for the raw values and their encodings.
func TestP11_CanaryNeverInAnyOutput(t *testing.T) {
	number, cvv, passwd := leakcheck.CardNumber("4", 16), leakcheck.Digits(4), randPassword()
	echo := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo-Query", r.URL.RawQuery)
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("Set-Cookie", "echo="+url.QueryEscape(string(b)))
		switch r.URL.Path {
		case "/error":
			http.Error(w, "bad card "+string(b), http.StatusBadRequest)
		case "/redirect":
			http.Redirect(w, r, "/next?"+string(b), http.StatusFound)
		case "/json":
			_ = json.NewEncoder(w).Encode(map[string]string{"echo": string(b), "q": r.URL.RawQuery})
		case "/b64":
			_, _ = w.Write([]byte(base64.StdEncoding.EncodeToString(b)))
		default:
			// Split the echo across many small writes (chunk borders).
			fl, _ := w.(http.Flusher)
			for i := 0; i < len(b); i += 3 {
				_, _ = w.Write(b[i:min(i+3, len(b))])
				if fl != nil {
					fl.Flush()
				}
			}
		}
	}
	f := newSubFixtureWith(t, false, echo, number, cvv, passwd)
	var sink bytes.Buffer
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		bodies := map[string]func() (string, io.Reader){
			"form": func() (string, io.Reader) {
				return "application/x-www-form-urlencoded", strings.NewReader(url.Values{"cc": {f.numSI}, "cvc": {f.cvvSI}, "pw": {f.passSI}}.Encode())
			},
			"json": func() (string, io.Reader) {
				b, _ := json.Marshal(map[string]string{"cc": f.numSI, "cvc": f.cvvSI, "pw": f.passSI})
				return "application/json", bytes.NewReader(b)
			},
			"multipart": func() (string, io.Reader) {
				var buf bytes.Buffer
				mw := multipart.NewWriter(&buf)
				_ = mw.WriteField("cc", f.numSI)
				_ = mw.WriteField("pw", f.passSI)
				_ = mw.Close()
				return mw.FormDataContentType(), &buf
			},
			"text": func() (string, io.Reader) {
				return "text/plain", strings.NewReader("card " + f.numSI + " pw " + f.passSI)
			},
			"unbound token": func() (string, io.Reader) {
				return "text/plain", strings.NewReader("card " + tok("card", "9", "number") + " " + f.numSI)
			},
		}
		for name, mk := range bodies {
			for _, path := range []string{"/echo", "/error", "/redirect", "/json", "/b64"} {
				for _, host := range []string{"shop.test", "evil.test"} {
					ct, body := mk()
					req, _ := http.NewRequest("POST", hostURL(f.up, host, path+"?cc="+f.numSI+"&pw="+url.QueryEscape(f.passSI)), body)
					req.Header.Set("Content-Type", ct)
					req.SetBasicAuth("owner", f.passSI)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatalf("%s %s %s: %v", name, path, host, err)
					}
					fmt.Fprintf(&sink, "%d %v\n", resp.StatusCode, resp.Header)
					_, _ = io.Copy(&sink, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}
	if f.up.count() == 0 {
		t.Fatal("no request reached the upstream")
	}
	real := leakcheck.New(leakcheck.Value("card number", number), leakcheck.Value("cvv", cvv), leakcheck.Value("password", passwd))
	real.Text(t, "responses", sink.Bytes())
	real.Logs(t, "logs", []byte(f.e.logs.String()))
	real.Metrics(t, "metrics", []byte(metricsText(t, f.e)))
	// Stand-ins are the browser's to see, never the log's.
	standIns := leakcheck.New(leakcheck.Value("card number stand-in", f.numSI), leakcheck.Value("cvv stand-in", f.cvvSI),
		leakcheck.Value("password stand-in", f.passSI))
	standIns.Logs(t, "logs", []byte(f.e.logs.String()))
	t.Logf("P11 sweep covered %s", real.Summary())
}
