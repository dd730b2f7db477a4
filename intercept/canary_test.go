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
)

func randDigits(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		b.WriteByte(byte('0' + d.Int64()))
	}
	return b.String()
}

// randCard returns a random 16-digit number passing Luhn.
func randCard() string {
	for {
		s := "4" + randDigits(15)
		sum := 0
		for i := len(s) - 1; i >= 0; i-- {
			x := int(s[i] - '0')
			if (len(s)-1-i)%2 == 1 {
				x *= 2
				if x > 9 {
					x -= 9
				}
			}
			sum += x
		}
		if sum%10 == 0 {
			return s
		}
	}
}

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
	number, cvv, passwd := randCard(), randDigits(4), randPassword()
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
	for sinkName, text := range map[string]string{
		"responses": sink.String(),
		"logs":      f.e.logs.String(),
		"metrics":   metricsText(t, f.e),
	} {
		if leaks := leakedForms(text, number, passwd); len(leaks) > 0 {
			t.Errorf("%s hold a real value in forms %v", sinkName, leaks)
		}
		if strings.Contains(text, "cvc="+cvv) || strings.Contains(text, `"cvc":"`+cvv) {
			t.Errorf("%s hold the CVV", sinkName)
		}
	}
	for _, si := range []string{f.numSI, f.passSI, url.QueryEscape(f.passSI)} {
		if strings.Contains(f.e.logs.String(), si) {
			t.Error("a stand-in is in the logs")
		}
	}
}
