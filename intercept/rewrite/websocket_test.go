package rewrite

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/websocket"

	agentvault "github.com/agentvault/agentvault"
)

// frame builds one WebSocket frame; a non-nil key masks the payload.
func frame(fin bool, rsv, opcode byte, payload []byte, key []byte) []byte {
	b0 := opcode | rsv
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	maskBit := byte(0)
	if key != nil {
		maskBit = 0x80
	}
	switch l := len(payload); {
	case l <= 125:
		out = append(out, maskBit|byte(l))
	case l <= 0xffff:
		out = append(out, maskBit|126)
		out = binary.BigEndian.AppendUint16(out, uint16(l))
	default:
		out = append(out, maskBit|127)
		out = binary.BigEndian.AppendUint64(out, uint64(l))
	}
	p := append([]byte(nil), payload...)
	if key != nil {
		out = append(out, key...)
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return append(out, p...)
}

type parsedFrame struct {
	fin     bool
	opcode  byte
	masked  bool
	key     [4]byte
	payload []byte
}

func parseFrames(t *testing.T, b []byte) []parsedFrame {
	t.Helper()
	var out []parsedFrame
	br := bufio.NewReader(bytes.NewReader(b))
	for {
		h, err := readFrameHeader(br)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if h.masked {
			maskBytes(h.mask, p)
		}
		out = append(out, parsedFrame{h.fin, h.opcode, h.masked, h.mask, p})
	}
}

func runFrames(t *testing.T, r Replacer, fromClient bool, max int, in []byte) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	err := NewFrameRewriter(r, fromClient, max).Run(&out, bytes.NewReader(in))
	return out.Bytes(), err
}

func TestP9_WebSocketMaskedClientFrames(t *testing.T) {
	key := []byte{1, 2, 3, 4}
	long := strings.Repeat("x", 70000) + tokNumber
	var in []byte
	in = append(in, frame(true, 0, opText, []byte(`{"n":"\u0061v_card_1_number_u7x2k","c":"123"}`), key)...)
	in = append(in, frame(true, 0, opBinary, []byte(tokNumber), key)...) // binary: untouched
	in = append(in, frame(true, 0, opText, []byte(long), key)...)
	out, err := runFrames(t, testReplacer(), true, 1<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	fs := parseFrames(t, out)
	if len(fs) != 3 {
		t.Fatalf("%d frames, want 3", len(fs))
	}
	if string(fs[0].payload) != `{"n":"`+realNumber+`","c":"`+realCVV+`"}` || !fs[0].masked || !fs[0].fin {
		t.Fatal("text frame not rewritten and re-masked")
	}
	if fs[0].key == [4]byte{1, 2, 3, 4} && fs[2].key == [4]byte{1, 2, 3, 4} {
		t.Fatal("mask key reused instead of fresh")
	}
	if string(fs[1].payload) != tokNumber || fs[1].opcode != opBinary {
		t.Fatal("binary frame changed")
	}
	if !bytes.Equal(frame(true, 0, opBinary, []byte(tokNumber), key), out[len(frame(true, 0, opText, fs[0].payload, key)):][:len(frame(true, 0, opBinary, []byte(tokNumber), key))]) {
		t.Fatal("binary frame not byte-identical")
	}
	if string(fs[2].payload) != strings.Repeat("x", 70000)+realNumber {
		t.Fatal("64-bit-length text frame not rewritten")
	}
}

func TestP9_WebSocketFragmentedMessage(t *testing.T) {
	key := []byte{9, 8, 7, 6}
	msg := "pay with " + tokNumber + " now"
	split := strings.Index(msg, "number") // the token straddles two fragments
	var in []byte
	in = append(in, frame(false, 0, opText, []byte(msg[:split]), key)...)
	in = append(in, frame(true, 0, 0x9, []byte("ping"), key)...) // control frame between fragments
	in = append(in, frame(false, 0, opContinuation, []byte(msg[split:split+3]), key)...)
	in = append(in, frame(true, 0, opContinuation, []byte(msg[split+3:]), key)...)
	out, err := runFrames(t, testReplacer(), true, 1<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	fs := parseFrames(t, out)
	if len(fs) != 2 || fs[0].opcode != 0x9 || string(fs[0].payload) != "ping" {
		t.Fatalf("control frame not passed through first (%d frames)", len(fs))
	}
	if fs[1].opcode != opText || !fs[1].fin || string(fs[1].payload) != "pay with "+realNumber+" now" {
		t.Fatal("fragmented text message not reassembled and rewritten")
	}
}

func TestP10_WebSocketServerFrames(t *testing.T) {
	scrub := naiveReplacer{pairs: [][2]string{{realNumber, "4111119999991111"}}}
	in := append(frame(false, 0, opText, []byte("card "+realNumber[:8]), nil), frame(true, 0, opContinuation, []byte(realNumber[8:]), nil)...)
	out, err := runFrames(t, scrub, false, 1<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	fs := parseFrames(t, out)
	if len(fs) != 1 || fs[0].masked || string(fs[0].payload) != "card 4111119999991111" {
		t.Fatal("server text message not scrubbed")
	}
}

func TestP10_WebSocketCloseReasonScrubbed(t *testing.T) {
	scrub := naiveReplacer{pairs: [][2]string{{realNumber, "4111119999991111"}}}
	in := append(frame(true, 0, 0x8, append([]byte{0x03, 0xe8}, "bad card "+realNumber...), nil),
		frame(true, 0, 0xA, []byte("pong"), nil)...)
	out, err := runFrames(t, scrub, false, 1<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	fs := parseFrames(t, out)
	if len(fs) != 2 || string(fs[0].payload) != "\x03\xe8bad card 4111119999991111" || string(fs[1].payload) != "pong" {
		t.Fatalf("control frames not forwarded as expected: %d frames", len(fs))
	}
	if !bytes.Equal(out[len(out)-6:], frame(true, 0, 0xA, []byte("pong"), nil)) {
		t.Fatal("unchanged control frame not byte-identical")
	}
}

func TestP9_WebSocketRefusals(t *testing.T) {
	key := []byte{1, 1, 1, 1}
	cases := []struct {
		name       string
		fromClient bool
		in         []byte
		code       agentvault.Code
	}{
		{"permessage-deflate RSV1", true, frame(true, 0x40, opText, []byte("x"), key), agentvault.CodeSubstitution},
		{"unmasked client frame", true, frame(true, 0, opText, []byte("x"), nil), agentvault.CodeMalformedRequest},
		{"masked server frame", false, frame(true, 0, opText, []byte("x"), key), agentvault.CodeMalformedRequest},
		{"message over cap", true, append(frame(false, 0, opText, make([]byte, 60), key), frame(true, 0, opContinuation, make([]byte, 60), key)...), agentvault.CodeBodyTooLarge},
		{"continuation without start", true, frame(true, 0, opContinuation, []byte("x"), key), agentvault.CodeMalformedRequest},
		{"fragmented control", true, frame(false, 0, 0x9, []byte("x"), key), agentvault.CodeMalformedRequest},
		{"truncated payload", true, frame(true, 0, opText, []byte("hello"), key)[:8], agentvault.CodeMalformedRequest},
		{"ends inside message", true, frame(false, 0, opText, []byte("x"), key), agentvault.CodeMalformedRequest},
		{"forbidden token", true, frame(true, 0, opText, []byte(tokForbid), key), agentvault.CodeTokenNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runFrames(t, testReplacer(), tc.fromClient, 100, tc.in)
			if agentvault.ErrorCode(err) != tc.code {
				t.Fatalf("code = %s, want %s", show(agentvault.ErrorCode(err)), show(tc.code))
			}
			if len(out) != 0 {
				t.Fatalf("%d bytes written before the refusal", len(out))
			}
		})
	}
}

// TestP9_WebSocketThroughLoopbackRelay runs a real x/net/websocket client and
// server over loopback TCP with the two rewriters in between, the way the
// proxy will splice them after the handshake.
func TestP9_WebSocketThroughLoopbackRelay(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(websocket.Handler(func(ws *websocket.Conn) {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return
		}
		got <- msg
		websocket.Message.Send(ws, "stored "+msg)
	}))
	defer srv.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	scrub := naiveReplacer{pairs: [][2]string{{realNumber, "4111119999991111"}}}
	relayErr := make(chan error, 2)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			relayErr <- err
			return
		}
		defer c.Close()
		up, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			relayErr <- err
			return
		}
		defer up.Close()
		cr, ur := bufio.NewReader(c), bufio.NewReader(up)
		if err := copyHead(up, cr); err != nil {
			relayErr <- err
			return
		}
		if err := copyHead(c, ur); err != nil {
			relayErr <- err
			return
		}
		go func() { relayErr <- NewFrameRewriter(testReplacer(), true, 1<<20).Run(up, cr) }()
		relayErr <- NewFrameRewriter(scrub, false, 1<<20).Run(c, ur)
	}()

	ws, err := websocket.Dial("ws://"+ln.Addr().String()+"/", "", "http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := websocket.Message.Send(ws, "card "+tokNumber); err != nil {
		t.Fatal(err)
	}
	if msg := <-got; msg != "card "+realNumber {
		t.Fatalf("server got %d bytes, not the substituted message", len(msg))
	}
	var reply string
	if err := websocket.Message.Receive(ws, &reply); err != nil {
		t.Fatal(err)
	}
	if reply != "stored card 4111119999991111" {
		t.Fatalf("client got %d bytes, not the scrubbed reply", len(reply))
	}
}

// copyHead forwards an HTTP/1.1 head (up to the empty line) unchanged.
func copyHead(dst io.Writer, src *bufio.Reader) error {
	for {
		line, err := src.ReadString('\n')
		if err != nil {
			return err
		}
		if _, err := io.WriteString(dst, line); err != nil {
			return err
		}
		if line == "\r\n" {
			return nil
		}
	}
}
