package rewrite

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzWebSocket feeds arbitrary bytes to a client-side FrameRewriter: it must
// never panic, and whatever it accepts must come out as well-formed masked
// frames whose text messages are the reference replacement of the input's.
func FuzzWebSocket(f *testing.F) {
	key := []byte{1, 2, 3, 4}
	f.Add(frame(true, 0, opText, []byte("x tok_abcdefgh y"), key))
	f.Add(append(frame(false, 0, opText, []byte("tok_ab"), key), frame(true, 0, opContinuation, []byte("cdefgh"), key)...))
	f.Add(append(frame(false, 0, opBinary, []byte("tok_ab"), key), frame(true, 0, opContinuation, []byte("cdefgh"), key)...))
	f.Add(frame(true, 0, 0x8, []byte{3, 232}, key))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := NewFrameRewriter(fuzzReplacer, true, 4096).Run(&out, bytes.NewReader(in)); err != nil {
			return
		}
		want := textMessages(t, in, false)
		for i := range want {
			if looksLikeJSON([]byte(want[i])) {
				// JSON messages are walked; FuzzJSON checks the walk.
				j, _, _ := JSON([]byte(want[i]), fuzzReplacer)
				want[i] = string(j)
				continue
			}
			want[i], _ = refText(want[i])
		}
		got := textMessages(t, out.Bytes(), true)
		if len(got) != len(want) {
			t.Fatalf("%d text messages out, %d in", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("message %d: got %s, want %s", i, show(got[i]), show(want[i]))
			}
		}
	})
}

// textMessages reassembles the text messages of a masked frame stream.
func textMessages(t *testing.T, b []byte, mustBeWellFormed bool) []string {
	var out []string
	var cur []byte
	inText, inBinary := false, false
	br := bufio.NewReader(bytes.NewReader(b))
	for {
		h, err := readFrameHeader(br)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("frame header: %v", err)
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal("truncated frame in accepted stream")
		}
		if !h.masked {
			t.Fatal("unmasked client frame")
		}
		maskBytes(h.mask, p)
		switch {
		case h.opcode >= 8:
		case h.opcode == opText:
			inText, cur = !h.fin, append([]byte(nil), p...)
			if h.fin {
				out = append(out, string(cur))
			}
		case h.opcode == opBinary:
			inBinary = !h.fin
		case h.opcode == opContinuation && inBinary:
			inBinary = !h.fin
		case h.opcode == opContinuation && inText:
			if mustBeWellFormed {
				t.Fatal("rewritten text message still fragmented")
			}
			cur = append(cur, p...)
			if h.fin {
				inText = false
				out = append(out, string(cur))
			}
		}
	}
}
