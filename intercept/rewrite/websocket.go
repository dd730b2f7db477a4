package rewrite

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"

	agentvault "github.com/agentvault/agentvault"
)

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
)

// FrameRewriter rewrites one direction of a WebSocket connection (RFC 6455)
// after the handshake. Text messages are reassembled from their fragments (up
// to maxMessage bytes), rewritten (walked as JSON when the message is JSON,
// as most are, so \u escapes are seen; free text otherwise) and sent on as
// one frame:
// RFC 6455 section 5.4 lets an intermediary change the fragmentation of a
// message that uses no extension. Frames from the client are unmasked and the
// rewritten frame is masked again with a fresh key, as section 5.3 requires.
// Binary messages pass through untouched, streamed. Control frames are
// forwarded at once (they may arrive between the fragments of a text
// message); a close reason or ping/pong payload is application text too, so
// it is rewritten like a message, and refused if it no longer fits in the
// 125 bytes a control frame allows.
//
// With Stream set (the proxy sets it for the server's direction), binary
// messages are reassembled too, up to the same limit, and every data
// message, text or binary, goes to Stream whole; Stream decides what to send
// and when (it may hold a message back until the next one, so a value split
// across messages is still seen). Held messages are flushed before a close
// frame is forwarded and when the connection ends at a message boundary.
//
// The proxy strips Sec-WebSocket-Extensions from the handshake, so no
// extension may be in use: a frame with RSV1 (permessage-deflate), RSV2 or
// RSV3 set is refused, as is a frame that breaks the masking rule for its
// direction. A FrameRewriter serves one direction of one connection and is
// not safe for concurrent use.
type FrameRewriter struct {
	r          Replacer
	fromClient bool
	maxMessage int

	// Replaced counts the values replaced so far; read it after Run returns.
	Replaced int

	// Stream, when set, receives every complete data message instead of
	// the replacer (see above). Control frames still go through the
	// replacer.
	Stream MessageStream
}

// MessageStream rewrites the data messages of one direction as one stream.
// Message takes a complete message (payload unmasked; the callee copies what
// it keeps) and returns the messages to send now, in order: it may return
// none and hand a message back with a later call. Flush returns every
// message still held; the stream is ending.
type MessageStream interface {
	Message(binary bool, payload []byte) ([]Message, error)
	Flush() ([]Message, error)
}

// Message is one whole WebSocket data message.
type Message struct {
	Binary  bool
	Payload []byte
}

// NewFrameRewriter returns a rewriter for frames sent by the client
// (fromClient) or by the server. maxMessage <= 0 means DefaultLimit.
func NewFrameRewriter(r Replacer, fromClient bool, maxMessage int) *FrameRewriter {
	if maxMessage <= 0 {
		maxMessage = DefaultLimit
	}
	// The rewriter keeps its buffer for the connection's life (never
	// released to the pool).
	sr, _ := withScratch(r)
	return &FrameRewriter{r: sr, fromClient: fromClient, maxMessage: maxMessage}
}

type frameHeader struct {
	fin     bool
	rsv     byte
	opcode  byte
	masked  bool
	mask    [4]byte
	length  uint64
	rawHead []byte
}

// Run copies frames from src to dst until src ends (nil at a frame boundary
// outside a message) or something is wrong (a coded error; the caller closes
// both sides). A text message is written only once it is complete, so a
// value is never sent half-rewritten.
func (f *FrameRewriter) Run(dst io.Writer, src io.Reader) error {
	br := bufio.NewReader(src)
	var msg []byte    // message being reassembled (text, or any with Stream)
	inText := false   // a message being reassembled is open
	inBinary := false // a fragmented binary message is open, streamed through
	binaryMsg := false
	for {
		h, err := readFrameHeader(br)
		if err != nil {
			if errors.Is(err, io.EOF) && !inText && !inBinary {
				return f.flush(dst)
			}
			if errors.Is(err, io.EOF) {
				return wsError("connection ended inside a message")
			}
			return err
		}
		if h.rsv != 0 {
			return agentvault.Errorf(agentvault.CodeSubstitution, "compressed or extended WebSocket frame")
		}
		if h.masked != f.fromClient {
			return wsError("frame masking does not match its direction")
		}
		if h.opcode >= 0x8 { // control
			if !h.fin || h.length > 125 {
				return wsError("invalid control frame")
			}
			const opClose = 0x8
			if h.opcode == opClose {
				if err := f.flush(dst); err != nil {
					return err
				}
			}
			if err := f.control(dst, br, h); err != nil {
				return err
			}
			continue
		}
		switch h.opcode {
		case opText:
			if inText || inBinary {
				return wsError("new message inside a fragmented one")
			}
			inText, binaryMsg = true, false
			msg = msg[:0]
		case opBinary:
			if inText || inBinary {
				return wsError("new message inside a fragmented one")
			}
			if f.Stream != nil {
				inText, binaryMsg = true, true
				msg = msg[:0]
				break
			}
			inBinary = !h.fin
			if err := passThrough(dst, br, h); err != nil {
				return err
			}
			continue
		case opContinuation:
			if inBinary {
				inBinary = !h.fin
				if err := passThrough(dst, br, h); err != nil {
					return err
				}
				continue
			}
			if !inText {
				return wsError("continuation frame outside a message")
			}
		default:
			return wsError("reserved opcode")
		}
		// A fragment of a message being reassembled.
		if h.length > uint64(f.maxMessage-len(msg)) {
			return agentvault.Errorf(agentvault.CodeBodyTooLarge, "WebSocket message exceeds the size limit")
		}
		start := len(msg)
		msg = append(msg, make([]byte, h.length)...)
		if _, err := io.ReadFull(br, msg[start:]); err != nil {
			return wsError("truncated frame")
		}
		if h.masked {
			maskBytes(h.mask, msg[start:])
		}
		if !h.fin {
			continue
		}
		inText = false
		if f.Stream != nil {
			out, err := f.Stream.Message(binaryMsg, msg)
			clear(msg)
			if cap(msg) > 1<<20 {
				msg = nil
			}
			if err != nil {
				return err
			}
			if err := f.writeMessages(dst, out); err != nil {
				return err
			}
			continue
		}
		rep, n, err := byMediaType("", msg, f.r, false)
		if err != nil {
			return err
		}
		f.Replaced += n
		err = f.writeText(dst, rep)
		// The message may hold a real value: do not keep it around.
		clear(msg)
		clear(rep)
		if cap(msg) > 1<<20 {
			msg = nil
		}
		if err != nil {
			return err
		}
	}
}

// flush sends what Stream still holds: a close frame or the end of the
// connection ends the stream of data messages.
func (f *FrameRewriter) flush(dst io.Writer) error {
	if f.Stream == nil {
		return nil
	}
	out, err := f.Stream.Flush()
	if err != nil {
		return err
	}
	return f.writeMessages(dst, out)
}

// writeMessages writes each message as one final frame and wipes it.
func (f *FrameRewriter) writeMessages(dst io.Writer, ms []Message) error {
	var err error
	for _, m := range ms {
		op := byte(opText)
		if m.Binary {
			op = opBinary
		}
		if err == nil {
			err = f.writeFrame(dst, 0x80|op, m.Payload)
		}
		clear(m.Payload)
	}
	return err
}

func wsError(why string) error {
	return agentvault.Errorf(agentvault.CodeMalformedRequest, "WebSocket: %s", why)
}

func readFrameHeader(br *bufio.Reader) (frameHeader, error) {
	var h frameHeader
	var b [14]byte
	if _, err := io.ReadFull(br, b[:2]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return h, wsError("truncated frame header")
		}
		return h, err
	}
	h.fin = b[0]&0x80 != 0
	h.rsv = b[0] & 0x70
	h.opcode = b[0] & 0x0f
	h.masked = b[1]&0x80 != 0
	n := 2
	switch l := b[1] & 0x7f; l {
	case 126:
		if _, err := io.ReadFull(br, b[n:n+2]); err != nil {
			return h, wsError("truncated frame header")
		}
		h.length = uint64(binary.BigEndian.Uint16(b[n:]))
		n += 2
	case 127:
		if _, err := io.ReadFull(br, b[n:n+8]); err != nil {
			return h, wsError("truncated frame header")
		}
		h.length = binary.BigEndian.Uint64(b[n:])
		if h.length>>63 != 0 {
			return h, wsError("invalid frame length")
		}
		n += 8
	default:
		h.length = uint64(l)
	}
	if h.masked {
		if _, err := io.ReadFull(br, b[n:n+4]); err != nil {
			return h, wsError("truncated frame header")
		}
		copy(h.mask[:], b[n:n+4])
		n += 4
	}
	h.rawHead = append([]byte(nil), b[:n]...)
	return h, nil
}

// control forwards a control frame, its payload (after the status code for a
// close frame) rewritten as text.
func (f *FrameRewriter) control(dst io.Writer, br *bufio.Reader, h frameHeader) error {
	p := make([]byte, h.length)
	if _, err := io.ReadFull(br, p); err != nil {
		return wsError("truncated frame")
	}
	if h.masked {
		maskBytes(h.mask, p)
	}
	const opClose = 0x8
	keep := 0
	if h.opcode == opClose && len(p) >= 2 {
		keep = 2
	}
	rep, n, err := text(f.r, p[keep:])
	if err != nil {
		return err
	}
	if n == 0 {
		if h.masked {
			maskBytes(h.mask, p) // back to the bytes received
		}
		_, err := dst.Write(append(h.rawHead, p...))
		return err
	}
	f.Replaced += n
	payload := append(p[:keep:keep], rep...)
	if len(payload) > 125 {
		return agentvault.Errorf(agentvault.CodeSubstitution, "rewritten WebSocket control frame exceeds 125 bytes")
	}
	return f.writeFrame(dst, 0x80|h.opcode, payload)
}

// passThrough forwards a frame unchanged, streaming its payload.
func passThrough(dst io.Writer, br *bufio.Reader, h frameHeader) error {
	if _, err := dst.Write(h.rawHead); err != nil {
		return err
	}
	if _, err := io.CopyN(dst, br, int64(h.length)); err != nil {
		if errors.Is(err, io.EOF) {
			return wsError("truncated frame")
		}
		return err
	}
	return nil
}

// writeText writes one final text frame.
func (f *FrameRewriter) writeText(dst io.Writer, payload []byte) error {
	return f.writeFrame(dst, 0x80|opText, payload)
}

// writeFrame writes one frame, masked with a fresh key when it goes to the
// server.
func (f *FrameRewriter) writeFrame(dst io.Writer, b0 byte, payload []byte) error {
	head := make([]byte, 0, 14+len(payload))
	head = append(head, b0)
	maskBit := byte(0)
	if f.fromClient {
		maskBit = 0x80
	}
	switch l := len(payload); {
	case l <= 125:
		head = append(head, maskBit|byte(l))
	case l <= 0xffff:
		head = append(head, maskBit|126)
		head = binary.BigEndian.AppendUint16(head, uint16(l))
	default:
		head = append(head, maskBit|127)
		head = binary.BigEndian.AppendUint64(head, uint64(l))
	}
	var key [4]byte
	if f.fromClient {
		if _, err := rand.Read(key[:]); err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "WebSocket mask")
		}
		head = append(head, key[:]...)
	}
	frame := append(head, payload...)
	if f.fromClient {
		maskBytes(key, frame[len(head):])
	}
	_, err := dst.Write(frame)
	clear(frame) // io.Writer must not retain it

	return err
}

func maskBytes(key [4]byte, b []byte) {
	for i := range b {
		b[i] ^= key[i&3]
	}
}
