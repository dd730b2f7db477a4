package intercept

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzP2_NormalizeDestination: never panics, output is canonical (normalising
// it again changes nothing) and holds only host-name bytes.
func FuzzP2_NormalizeDestination(f *testing.F) {
	for _, s := range []string{"A.COM.", "a.com:443", "[::ffff:1.2.3.4]:443", "аpple.test", "a.com@evil.com", "evil.com/a.com",
		"xn--pple-43d.test", "1.2.3.4:8443", "[fe80::1%25eth0]:443", "a..b", "ＡＢＣ.com", "a.com:+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := NormalizeDestination(in, 443)
		if err != nil {
			return
		}
		again, err := NormalizeDestination(d.String(), 443)
		if err != nil || again != d {
			t.Fatalf("not canonical: %q -> %q -> %q (%v)", in, d.String(), again.String(), err)
		}
		if strings.ContainsAny(d.Host, "@/\\?# %") || d.Host != strings.ToLower(d.Host) || strings.HasSuffix(d.Host, ".") {
			t.Fatalf("bad host %q from %q", d.Host, in)
		}
	})
}

// FuzzP8_RawHeaderCheck: never panics, and whatever it accepts Go parses to
// a request with one unambiguous length.
func FuzzP8_RawHeaderCheck(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Card\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(raw), maxHeaderBytes+4096)
		if err := checkRawHeader(br); err != nil {
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if len(req.Header.Values("Content-Length")) > 1 || (req.ContentLength >= 0 && len(req.TransferEncoding) > 0) {
			t.Fatalf("accepted an ambiguous length: %q", raw)
		}
	})
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestP6_LeafCacheBoundedAndRenewed(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ca, _, err := NewCA(clk.now)
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.Leaf("a.test")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := ca.Leaf("a.test"); again != first {
		t.Fatal("fresh leaf not cached")
	}
	clk.t = clk.t.Add(leafValidity - leafSlack/2) // close to expiry: renewed
	if renewed, _ := ca.Leaf("a.test"); renewed == first || !renewed.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Fatal("a leaf close to expiry was served again")
	}
	for i := 0; i < leafCacheMax+50; i++ {
		if _, err := ca.Leaf("h" + strconv.Itoa(i) + ".test"); err != nil {
			t.Fatal(err)
		}
	}
	ca.mu.Lock()
	n := ca.lru.Len()
	ca.mu.Unlock()
	if n > leafCacheMax {
		t.Fatalf("leaf cache holds %d entries", n)
	}
}
