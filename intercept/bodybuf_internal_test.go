package intercept

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The buffer goes back wiped only when forward and the outgoing body are
// both done with it, in either order; a read after Close gets an error,
// not the bytes.
func TestBodyBufReleasedOnceBothAreDone(t *testing.T) {
	for _, readerFirst := range []bool{false, true} {
		b := getBodyBuf(100 << 10)
		if b == nil || len(b.bytes()) != 100<<10 || len(b.buf) != 128<<10 {
			t.Fatal("a 100 KiB body is not pooled in a 128 KiB buffer")
		}
		copy(b.bytes(), bytes.Repeat([]byte("real"), 25<<10))
		r := b.reader(b.bytes()[:4096])
		if readerFirst {
			r.Close()
		} else {
			b.release()
		}
		if b.n == 0 || b.buf[0] == 0 {
			t.Fatal("the buffer went back while still held")
		}
		if readerFirst {
			b.release()
		} else {
			got, err := io.ReadAll(r)
			if err != nil || len(got) != 4096 {
				t.Fatalf("read %d bytes, %v", len(got), err)
			}
			r.Close()
		}
		if b.n != 0 || !allZero(b.buf) {
			t.Fatal("the buffer was not wiped when given back")
		}
		if n, err := r.Read(make([]byte, 10)); n != 0 || err == nil {
			t.Fatal("a read after Close got bytes")
		}
	}
	if getBodyBuf(minPooledBody-1) != nil || getBodyBuf(1<<maxBodyClass+1) != nil {
		t.Fatal("a body outside the pooled sizes got a pooled buffer")
	}
}

// Close from another goroutine while WriteTo is writing does not wait for
// it, and the buffer stays out of the pool until the write has returned.
func TestPooledReaderCloseDuringWrite(t *testing.T) {
	b := getBodyBuf(minPooledBody)
	copy(b.bytes(), bytes.Repeat([]byte{'v'}, minPooledBody))
	r := b.reader(b.bytes())
	b.release() // forward is done: only the reader holds it
	w := &blockingWriter{started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := r.(io.WriterTo).WriteTo(w)
		done <- err
	}()
	<-w.started
	r.Close() // returns at once
	if b.n == 0 || b.buf[0] != 'v' {
		t.Fatal("the buffer went back while a write was still reading it")
	}
	close(w.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.got, bytes.Repeat([]byte{'v'}, minPooledBody)) {
		t.Fatal("the write did not get the body whole")
	}
	if b.n != 0 || !allZero(b.buf) {
		t.Fatal("the buffer was not wiped once the write returned")
	}
	if _, err := r.(io.WriterTo).WriteTo(io.Discard); !errors.Is(err, errBodyClosed) {
		t.Fatalf("WriteTo after Close: %v", err)
	}
}

type blockingWriter struct {
	started, release chan struct{}
	got              []byte
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	close(w.started)
	<-w.release
	w.got = append(w.got, p...) // read after Close: must still be the body
	return len(p), nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
