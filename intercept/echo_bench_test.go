package intercept_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkEcho1MiB is bench/'s 1 MiB JSON echo in process: the body
// carries a login's password stand-in ("login"), a card number's stand-in
// with an authorize before each request ("card"), or nothing of the
// session ("none"); the site sends the body back, so an echo of a real
// value is scrubbed on the way back (P10). Profile with -cpuprofile.
//
//	go test -run '^$' -bench BenchmarkEcho1MiB -benchmem ./intercept/
func BenchmarkEcho1MiB(b *testing.B) {
	// bench/'s login password: nothing in it that JSON or a form escapes.
	f := newSubFixtureWith(b, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, r.Body)
	}, "4242424242424242", "737", "BenchPassw0rdForEcho2026")
	body := func(v string) string {
		head := `{"card":"` + v + `","name":"Bench User","email":"bench@example.test","amount":42.0,"pad":"`
		return head + strings.Repeat("x", 1<<20-len(head)-2) + `"}`
	}
	for _, c := range []struct {
		name, value, real string
		reauth            bool
	}{
		{"login", f.passSI, f.passwd, false},
		{"card", f.numSI, f.number, true},
		{"none", "nothing-of-the-session", "nothing-of-the-session", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := body(c.value)
			want := len(body(c.real))
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			cpu0 := processCPU()
			n := 0
			for ; b.Loop(); n++ {
				if c.reauth {
					f.reauth(b)
				}
				resp, err := f.client.Post(f.url("/echo"), "application/json", strings.NewReader(in))
				if err != nil {
					b.Fatal(err)
				}
				got, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if code := codeOf(resp); code != "" || int(got) != want {
					b.Fatalf("code %q, %d bytes", code, got)
				}
				if n%16 == 0 {
					f.up.mu.Lock()
					f.up.got = f.up.got[:0]
					f.up.mu.Unlock()
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/op")
		})
	}
}
