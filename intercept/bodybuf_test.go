package intercept_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A large request body is read into a pooled buffer, substituted in it and
// sent from it (bodybuf.go). Bodies of one size class follow each other
// through the same buffers: each must reach the site as sent (nothing of
// an earlier body's bytes, the real password of the one before included),
// its stand-ins swapped wherever they sit (P9), and the echo of a real
// value must come back as its stand-in (P10), over HTTP/1.1 and h2, on a
// body scrubbed whole and on one scrubbed as a stream.
func TestPooledBodySubstitutedAndScrubbed(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "h1"
		if h2 {
			name = "h2"
		}
		t.Run(name, func(t *testing.T) {
			f := newSubFixture(t, h2, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.Copy(w, r.Body)
			})
			// The stand-in at the start, across the 64 KiB mark and at the
			// end; sizes around the 256 KiB line between a response
			// scrubbed whole and one scrubbed as a stream.
			for i, size := range []int{300 << 10, 200 << 10, 290 << 10, 100 << 10, 1 << 20} {
				withValue := i%2 == 0
				si, real := "no-value-here", "no-value-here"
				if withValue {
					si, real = f.passSI, f.passwd
				}
				body := jsonBody(size, si)
				want := jsonBody(size, real)
				resp, err := f.client.Post(f.url("/echo"), "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				got := readAll(t, resp.Body)
				resp.Body.Close()
				if code := codeOf(resp); code != "" {
					t.Fatalf("body %d: refused with %s", i, code)
				}
				if sent := f.up.last().Body; !bytes.Equal(sent, []byte(want)) {
					t.Fatalf("body %d (%d bytes): the site got %d bytes, not the body with its values", i, size, len(sent))
				}
				if got != body {
					t.Fatalf("body %d: the echo did not come back as sent, stand-ins in place (%d bytes)", i, len(got))
				}
			}
		})
	}
}

// jsonBody is a JSON document of size bytes holding v three times: first,
// astride offset 64 KiB, and last.
func jsonBody(size int, v string) string {
	head := `{"a":"` + v + `","pad":"`
	mid := `","b":"` + v + `","pad2":"`
	tail := `","c":"` + v + `"}`
	n1 := 64<<10 - len(head) - len(mid)/2
	n2 := size - len(head) - n1 - len(mid) - len(tail)
	return head + strings.Repeat("x", n1) + mid + strings.Repeat("y", n2) + tail
}

// A site that answers before it read the body makes net/http's h2 client
// close the outgoing body, on a goroutine of its own, perhaps while another
// still reads it: the pooled buffer must not go back (wiped, handed to the
// next request) under that read. Run with -race. A site that answers first
// and reads the body after must get all of it, though forward (and its
// hold on the buffer) ended with the answer's headers.
func TestPooledBodySiteAnswersEarly(t *testing.T) {
	e := startProxy(t, nil)
	early := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge) // body left unread
	}))
	early.EnableHTTP2 = true
	early.TLS = &tls.Config{Certificates: []tls.Certificate{e.upCA.leaf(t, testNames...)}}
	early.StartTLS()
	t.Cleanup(early.Close)
	_, port, _ := net.SplitHostPort(early.Listener.Addr().String())
	// A site that answers before it reads the body and then reads it all
	// (an h2 stream is full duplex): forward has returned while the body
	// is still going out of its buffer.
	var mu sync.Mutex
	var last []byte
	duplex := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = b
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	duplex.EnableHTTP2 = true
	duplex.TLS = early.TLS
	duplex.StartTLS()
	t.Cleanup(duplex.Close)
	_, dport, _ := net.SplitHostPort(duplex.Listener.Addr().String())
	e.addLogin("shop", "shop.test", "Tr0ub4dor-3xyz!")
	s, pw := e.session()
	a, err := e.authorize(s, tok("login", "shop", "password"), "https://shop.test:"+port+"/checkout")
	if err != nil || !a.StandIn {
		t.Fatalf("authorize: %v", err)
	}
	c := e.client(s, pw, false)
	for i := 0; i < 8; i++ {
		resp, err := c.Post("https://shop.test:"+port+"/upload", "application/json", strings.NewReader(jsonBody(1<<20, a.Value)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d (%s), want the site's 413", resp.StatusCode, codeOf(resp))
		}
		body := jsonBody(1<<20, "plain-"+strings.Repeat("z", i))
		resp, err = c.Post("https://shop.test:"+dport+"/duplex", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		mu.Lock()
		sent := last
		mu.Unlock()
		if string(sent) != body {
			t.Fatalf("round %d: the site got %d bytes, not the body as sent", i, len(sent))
		}
	}
}
