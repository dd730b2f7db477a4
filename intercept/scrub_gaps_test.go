package intercept_test

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The tests here cover the places P10 scrubbing missed (issue 8): header
// names, trailers, the reason phrase, and WebSocket binary, split and
// fragmented messages. In each the browser sends the stand-ins, the proxy
// sends the real values to the site, and the site puts them back in the
// place under test.

// startH1Upstream is startUpstream without HTTP/2, so a handler can hijack
// the connection and write what it likes (a reason phrase, raw frames).
func startH1Upstream(t testing.TB, ca *upstreamCA, h http.HandlerFunc) *upstream {
	u := &upstream{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, recorded{Method: r.Method, Host: r.Host, RequestURI: r.RequestURI, Proto: r.Proto, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, testNames...)}, NextProtos: []string{"http/1.1"}}
	srv.StartTLS()
	u.Server = srv
	t.Cleanup(srv.Close)
	return u
}

// newGapFixture is newSubFixtureWith with the choice of an HTTP/1.1-only
// upstream.
func newGapFixture(t testing.TB, h1Upstream bool, passwd string, handler http.HandlerFunc) *subFixture {
	f := &subFixture{number: "4242424242424242", cvv: "737", passwd: passwd}
	f.e = startProxy(t, nil)
	if h1Upstream {
		f.up = startH1Upstream(t, f.e.upCA, handler)
	} else {
		f.up = startUpstream(t, f.e.upCA, handler)
	}
	f.e.addCard("1", f.number, f.cvv, "shop.test")
	f.e.addLogin("shop", "shop.test", f.passwd)
	f.s, f.pw = f.e.session()
	page := f.url("/checkout")
	for _, x := range []struct {
		tok string
		dst *string
	}{{tok("card", "1", "number"), &f.numSI}, {tok("card", "1", "cvv"), &f.cvvSI}, {tok("login", "shop", "password"), &f.passSI}} {
		a, err := f.e.authorize(f.s, x.tok, page)
		if err != nil {
			t.Fatal(err)
		}
		*x.dst = a.Value
	}
	if f.numSI == f.number || f.numSI[:6] != f.number[:6] {
		t.Fatal("card stand-in is not format-preserving")
	}
	return f
}

// postStandIns sends the stand-ins in a form; the site receives the real
// values (P9).
func (f *subFixture) postStandIns(t *testing.T, c *http.Client, path string) *http.Response {
	t.Helper()
	body := "cc=" + f.numSI + "&pw=" + url.QueryEscape(f.passSI)
	req, _ := http.NewRequest("POST", f.url(path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d code %s", resp.StatusCode, codeOf(resp))
	}
	return resp
}

// headerText renders a header map, names and values, for leak checks.
func headerText(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	return b.String()
}

// hasFold reports whether s holds v in any letter case.
func hasFold(s, v string) bool { return strings.Contains(strings.ToUpper(s), strings.ToUpper(v)) }

func TestP10_ScrubsResponseHeaderNames(t *testing.T) {
	// Mixed case, so the canonical name Go hands on ("X-Pw-Xyzzy-...")
	// no longer holds the value byte for byte.
	const passwd = "xYzzy-Pl0ugh!Q"
	f := newGapFixture(t, false, passwd, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("X-Card-"+r.PostFormValue("cc"), "1")
		w.Header().Set("X-Pw-"+r.PostFormValue("pw"), "2")
		w.Header().Set("X-Plain", "ok")
		_, _ = io.WriteString(w, "ok")
	})
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			resp := f.postStandIns(t, f.e.client(f.s, f.pw, h2), "/h")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if f.up.count() == 0 || !bytes.Contains(f.up.last().Body, []byte(f.number)) {
				t.Fatal("the site was not sent the real value")
			}
			names := ""
			for k := range resp.Header {
				names += k + "\n"
			}
			if hasFold(names, f.number) || hasFold(names, passwd) {
				t.Fatal("a response header name carries a real value")
			}
			if resp.Header.Get("X-Card-"+f.numSI) != "1" || resp.Header.Get("X-Plain") != "ok" {
				t.Fatal("header names not rewritten to the stand-in, or an unrelated header lost")
			}
		})
	}
}

func TestP10_ScrubsH1Trailers(t *testing.T) {
	f := newGapFixture(t, false, "Tr0ub4dor&3xyz!", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		cc := r.PostFormValue("cc")
		w.Header().Set("Trailer", "X-Ref, X-Card-"+cc)
		if r.URL.Path == "/sized" {
			// A length and trailers (h2 allows both): scrubbed whole.
			w.Header().Set("Content-Length", "13")
			_, _ = io.WriteString(w, "streamed body")
		} else {
			_, _ = io.WriteString(w, "streamed ")
			w.(http.Flusher).Flush() // no length: the body is streamed
			_, _ = io.WriteString(w, "body")
		}
		w.Header().Set("X-Ref", "paid with "+cc)
		w.Header().Set("X-Card-"+cc, "yes")
	})
	for _, tc := range []struct {
		path string
		h2   bool
	}{{"/t", false}, {"/t", true}, {"/sized", false}, {"/sized", true}} {
		h2 := tc.h2
		t.Run(fmt.Sprintf("%s h2=%v", tc.path, h2), func(t *testing.T) {
			resp := f.postStandIns(t, f.e.client(f.s, f.pw, h2), tc.path)
			body := readAll(t, resp.Body) // trailers arrive after the body
			resp.Body.Close()
			if body != "streamed body" {
				t.Fatalf("body %q", body)
			}
			all := headerText(resp.Header) + headerText(resp.Trailer)
			if hasFold(all, f.number) {
				t.Fatal("a trailer carries the real card number")
			}
			if tc.path == "/sized" && !h2 {
				return // HTTP/1.1 has no trailers after a sized body: dropped
			}
			if resp.Trailer.Get("X-Ref") != "paid with "+f.numSI || resp.Trailer.Get("X-Card-"+f.numSI) != "yes" {
				t.Fatalf("trailers not passed on scrubbed: %d", len(resp.Trailer))
			}
		})
	}
}

func TestP10_ScrubsReasonPhrase(t *testing.T) {
	f := newGapFixture(t, true, "Tr0ub4dor&3xyz!", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 200 Card " + r.PostFormValue("cc") + " accepted\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		_ = brw.Flush()
	})
	resp := f.postStandIns(t, f.e.client(f.s, f.pw, false), "/r")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !bytes.Contains(f.up.last().Body, []byte(f.number)) {
		t.Fatal("the site was not sent the real value")
	}
	if strings.Contains(resp.Status, f.number) || resp.Status != "200 Card "+f.numSI+" accepted" {
		t.Fatalf("reason phrase not scrubbed (has real value: %v)", strings.Contains(resp.Status, f.number))
	}
}

// WebSocket helpers: raw frames on both sides, so the tests see exactly
// which frames and messages cross the proxy.

type wsFrame struct {
	fin     bool
	op      byte
	payload []byte
}

func wsWrite(w io.Writer, fr wsFrame, mask bool) error {
	b0 := fr.op
	if fr.fin {
		b0 |= 0x80
	}
	head := []byte{b0}
	mb := byte(0)
	if mask {
		mb = 0x80
	}
	switch l := len(fr.payload); {
	case l <= 125:
		head = append(head, mb|byte(l))
	case l <= 0xffff:
		head = append(head, mb|126)
		head = binary.BigEndian.AppendUint16(head, uint16(l))
	default:
		head = append(head, mb|127)
		head = binary.BigEndian.AppendUint64(head, uint64(l))
	}
	p := append([]byte(nil), fr.payload...)
	if mask {
		key := [4]byte{0x12, 0x34, 0x56, 0x78}
		head = append(head, key[:]...)
		for i := range p {
			p[i] ^= key[i&3]
		}
	}
	_, err := w.Write(append(head, p...))
	return err
}

func wsRead(r *bufio.Reader) (wsFrame, error) {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return wsFrame{}, err
	}
	fr := wsFrame{fin: b[0]&0x80 != 0, op: b[0] & 0x0f}
	n := uint64(b[1] & 0x7f)
	switch n {
	case 126:
		var x [2]byte
		if _, err := io.ReadFull(r, x[:]); err != nil {
			return fr, err
		}
		n = uint64(binary.BigEndian.Uint16(x[:]))
	case 127:
		var x [8]byte
		if _, err := io.ReadFull(r, x[:]); err != nil {
			return fr, err
		}
		n = binary.BigEndian.Uint64(x[:])
	}
	var key [4]byte
	if b[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return fr, err
		}
	}
	fr.payload = make([]byte, n)
	if _, err := io.ReadFull(r, fr.payload); err != nil {
		return fr, err
	}
	if b[1]&0x80 != 0 {
		for i := range fr.payload {
			fr.payload[i] ^= key[i&3]
		}
	}
	return fr, nil
}

// wsMsg is one whole message as the client saw it.
type wsMsg struct {
	binary bool
	data   string
}

// wsReadMessage reads one data message, joining fragments and skipping
// control frames; ok is false at a close frame.
func wsReadMessage(t *testing.T, r *bufio.Reader) (m wsMsg, ok bool) {
	t.Helper()
	var data []byte
	first := true
	for {
		fr, err := wsRead(r)
		if err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		switch {
		case fr.op == 0x8:
			return m, false
		case fr.op >= 0x8:
			continue
		case first:
			m.binary, first = fr.op == 0x2, false
		}
		data = append(data, fr.payload...)
		if fr.fin {
			m.data = string(data)
			return m, true
		}
	}
}

// wsUpstream answers the handshake on the site's side, reads the client's
// first message (the real value, substituted by the proxy) and hands it
// to script, which writes the site's frames.
func wsUpstream(script func(bw *bufio.Writer, first string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-Websocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(sum[:]) + "\r\n\r\n")
		_ = brw.Flush()
		fr, err := wsRead(brw.Reader)
		if err != nil {
			return
		}
		script(brw.Writer, string(fr.payload))
		_ = brw.Flush()
		// Wait for the client's close, then answer it.
		for {
			fr, err := wsRead(brw.Reader)
			if err != nil {
				return
			}
			if fr.op == 0x8 {
				_ = wsWrite(conn, wsFrame{fin: true, op: 0x8, payload: fr.payload}, false)
				return
			}
		}
	}
}

// wsSession opens a WebSocket through the proxy (the stand-in in the
// handshake's query and in the first message, so the site is sent the real
// value), then reads want messages. The last one the site sends is "done.",
// after which it waits for the client: the proxy must not hold it back.
func wsSession(t *testing.T, script func(bw *bufio.Writer, number string)) (*subFixture, []wsMsg) {
	f := newGapFixture(t, false, "Tr0ub4dor&3xyz!", wsUpstream(func(bw *bufio.Writer, first string) {
		number := strings.TrimPrefix(first, "card ")
		script(bw, number)
		_ = wsWrite(bw, wsFrame{fin: true, op: 0x1, payload: []byte("done.")}, false)
	}))
	h := "shop.test:" + f.up.port()
	tc, err := f.e.tlsTunnel(t, f.s, f.pw, h, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = io.WriteString(tc, "GET /ws?cc="+f.numSI+" HTTP/1.1\r\nHost: "+h+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: https://"+h+"\r\n\r\n")
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", err, resp)
	}
	if err := wsWrite(tc, wsFrame{fin: true, op: 0x1, payload: []byte("card " + f.numSI)}, true); err != nil {
		t.Fatal(err)
	}
	var got []wsMsg
	for {
		m, ok := wsReadMessage(t, br)
		if !ok {
			t.Fatal("connection closed before the site's last message")
		}
		if m.data == "done." {
			break
		}
		got = append(got, m)
	}
	_ = wsWrite(tc, wsFrame{fin: true, op: 0x8, payload: []byte{0x03, 0xe8}}, true)
	if !strings.Contains(f.up.last().RequestURI, f.number) {
		t.Fatal("the site was not sent the real value")
	}
	return f, got
}

// joined is every message's data, in order.
func joined(ms []wsMsg) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.data)
	}
	return b.String()
}

func TestP10_ScrubsWebSocketBinaryFrames(t *testing.T) {
	f, got := wsSession(t, func(bw *bufio.Writer, number string) {
		_ = wsWrite(bw, wsFrame{fin: true, op: 0x2, payload: append([]byte("\x00\x01card="+number), 0xff, 0xfe)}, false)
	})
	if len(got) != 1 || !got[0].binary {
		t.Fatalf("want one binary message, got %d", len(got))
	}
	if strings.Contains(got[0].data, f.number) || got[0].data != "\x00\x01card="+f.numSI+"\xff\xfe" {
		t.Fatal("binary frame not scrubbed")
	}
}

func TestP10_ScrubsValueSplitAcrossWebSocketMessages(t *testing.T) {
	f, got := wsSession(t, func(bw *bufio.Writer, n string) {
		text := func(s string) { _ = wsWrite(bw, wsFrame{fin: true, op: 0x1, payload: []byte(s)}, false) }
		bin := func(s string) { _ = wsWrite(bw, wsFrame{fin: true, op: 0x2, payload: []byte(s)}, false) }
		// Split where the halves differ from the stand-in's.
		text("card " + n[:10])
		text(n[10:] + " end")
		// Split inside the first six digits, which the stand-in shares.
		text("again " + n[:4])
		bin(n[4:])
		// Split over three messages, one of them empty.
		text("spaced " + n[:4] + " " + n[4:7])
		text("")
		text(n[7:8] + " " + n[8:12] + " " + n[12:])
	})
	if len(got) != 7 {
		t.Fatalf("message boundaries not kept: %d messages, want 7", len(got))
	}
	all := joined(got)
	if strings.Contains(all, f.number) || strings.Contains(all, f.number[:4]+" "+f.number[4:8]+" "+f.number[8:12]) {
		t.Fatal("a value split across messages reached the client")
	}
	si := f.numSI
	want := []wsMsg{
		{false, "card " + si[:10]}, {false, si[10:] + " end"},
		{false, "again " + si[:4]}, {true, si[4:]},
		{false, "spaced " + si[:4] + " " + si[4:7]}, {false, ""}, {false, si[7:8] + " " + si[8:12] + " " + si[12:]},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d not the stand-in at the same offsets (binary=%v, %d bytes)", i, got[i].binary, len(got[i].data))
		}
	}
}

func TestP10_ScrubsFragmentedWebSocketMessage(t *testing.T) {
	f, got := wsSession(t, func(bw *bufio.Writer, n string) {
		for _, op := range []byte{0x1, 0x2} {
			_ = wsWrite(bw, wsFrame{fin: false, op: op, payload: []byte("pay " + n[:5])}, false)
			_ = wsWrite(bw, wsFrame{fin: true, op: 0x9, payload: []byte("ping")}, false) // control frames may come between fragments
			_ = wsWrite(bw, wsFrame{fin: false, op: 0x0, payload: []byte(n[5:11])}, false)
			_ = wsWrite(bw, wsFrame{fin: true, op: 0x0, payload: []byte(n[11:] + " ok")}, false)
		}
	})
	if len(got) != 2 || got[0].binary || !got[1].binary {
		t.Fatalf("want a text and a binary message, got %d", len(got))
	}
	for _, m := range got {
		if strings.Contains(m.data, f.number) || m.data != "pay "+f.numSI+" ok" {
			t.Fatalf("fragmented message (binary=%v) not scrubbed", m.binary)
		}
	}
}
