package intercept_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

type codec struct {
	name string
	enc  func([]byte) []byte
	dec  func([]byte) ([]byte, error)
}

var codecs = []codec{
	{"gzip", gz, func(b []byte) ([]byte, error) { return gunzip(b) }},
	{"deflate", func(b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
		return buf.Bytes()
	}, func(b []byte) ([]byte, error) {
		r, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}},
	{"br", func(b []byte) []byte {
		var buf bytes.Buffer
		w := brotli.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
		return buf.Bytes()
	}, func(b []byte) ([]byte, error) { return io.ReadAll(brotli.NewReader(bytes.NewReader(b))) }},
	{"zstd", func(b []byte) []byte {
		w, _ := zstd.NewWriter(nil)
		return w.EncodeAll(b, nil)
	}, func(b []byte) ([]byte, error) {
		r, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		return r.DecodeAll(b, nil)
	}},
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzipReader(b)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func TestP9_SubstitutesCompressedBodies(t *testing.T) {
	f := newSubFixture(t, false, nil)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", f.url("/z"), bytes.NewReader(c.enc([]byte(`{"cc":"`+f.numSI+`","pw":"`+f.passSI+`"}`))))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Encoding", c.name)
			resp, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, codeOf(resp))
			}
			got := f.up.last()
			plain, err := c.dec(got.Body)
			if err != nil {
				t.Fatalf("upstream body does not decode as %s: %v", c.name, err)
			}
			if !bytes.Contains(plain, []byte(f.number)) || bytes.Contains(plain, []byte(f.numSI)) {
				t.Fatal("compressed body not substituted")
			}
		})
	}
}

func TestP10_ScrubsCompressedResponses(t *testing.T) {
	var f *subFixture
	f = newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		for _, c := range codecs {
			if c.name == name {
				w.Header().Set("Content-Encoding", name)
				_, _ = w.Write(c.enc([]byte("card " + f.number + " pw " + f.passwd + strings.Repeat(" pad", 100000))))
			}
		}
	})
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		for _, cd := range codecs {
			t.Run(cd.name, func(t *testing.T) {
				req, _ := http.NewRequest("GET", f.url("/"+cd.name), nil)
				req.Header.Set("Accept-Encoding", cd.name) // the Go client then leaves decoding to us
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Content-Encoding") != "" {
					if b, err := cd.dec([]byte(body)); err == nil {
						body = string(b)
					}
				}
				if strings.Contains(body, f.number) || strings.Contains(body, f.passwd) || !strings.Contains(body, f.numSI) {
					t.Fatalf("compressed response not scrubbed (%d bytes)", len(body))
				}
			})
		}
	}
}

func gzipReader(b []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(b)) }

// TestP10_UnmatchedCompressedResponseUntouched: a small compressed body with
// no real value in it goes on exactly as the site sent it; one with a value
// is scrubbed and sent as identity with its new length.
func TestP10_UnmatchedCompressedResponseUntouched(t *testing.T) {
	var f *subFixture
	clean := gz([]byte("nothing secret here"))
	f = newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		if r.URL.Path == "/clean" {
			_, _ = w.Write(clean)
			return
		}
		_, _ = w.Write(gz([]byte("card " + f.number)))
	})
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		for _, path := range []string{"/clean", "/dirty"} {
			req, _ := http.NewRequest("GET", f.url(path), nil)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			resp.Body.Close()
			switch path {
			case "/clean":
				if resp.Header.Get("Content-Encoding") != "gzip" || body != string(clean) {
					t.Fatalf("h2=%v: clean body changed (encoding %q, %d bytes)", h2, resp.Header.Get("Content-Encoding"), len(body))
				}
			case "/dirty":
				if resp.Header.Get("Content-Encoding") != "" || body != "card "+f.numSI || resp.ContentLength != int64(len(body)) {
					t.Fatalf("h2=%v: dirty body not scrubbed to identity (encoding %q, %d bytes)", h2, resp.Header.Get("Content-Encoding"), len(body))
				}
			}
		}
	}
}

// TestP10_ScrubsStreamedCompressedResponses: a compressed body of unknown
// length is decoded, scrubbed and sent on as a stream, for every coding.
func TestP10_ScrubsStreamedCompressedResponses(t *testing.T) {
	var f *subFixture
	f = newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		for _, c := range codecs {
			if c.name != name {
				continue
			}
			var plain strings.Builder
			for i := 0; i < 3000; i++ {
				fmt.Fprintf(&plain, "row %d card %s pw %s\n", i, f.number, f.passwd)
			}
			enc := c.enc([]byte(plain.String()))
			w.Header().Set("Content-Encoding", name)
			fl := w.(http.Flusher)
			for i := 0; i < len(enc); i += 1000 {
				_, _ = w.Write(enc[i:min(i+1000, len(enc))])
				fl.Flush()
			}
		}
	})
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		for _, cd := range codecs {
			req, _ := http.NewRequest("GET", f.url("/"+cd.name), nil)
			req.Header.Set("Accept-Encoding", cd.name)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			resp.Body.Close()
			if resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != -1 {
				t.Fatalf("%s h2=%v: not streamed as identity (encoding %q, length %d)", cd.name, h2, resp.Header.Get("Content-Encoding"), resp.ContentLength)
			}
			if strings.Contains(body, f.number) || strings.Contains(body, f.passwd) || strings.Count(body, f.numSI) != 3000 {
				t.Fatalf("%s h2=%v: streamed response not scrubbed (%d bytes)", cd.name, h2, len(body))
			}
		}
	}
}
