package e2e

import (
	"bytes"
	"sync"
	"testing"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// The P11 sweeps of these tests go through internal/leakcheck, which knows
// how each sink is read (a log, a tool answer, a page, the metrics). What
// lives here is where an agent's answers are kept until the sweep.

// answers keeps what an agent was answered, one entry per Write (a result's
// JSON, its text), so that each is read as one answer.
type answers struct {
	mu      sync.Mutex
	entries [][]byte
}

func (a *answers) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, bytes.Clone(p))
	return len(p), nil
}

// Bytes joins the entries, one a line.
func (a *answers) Bytes() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return bytes.Join(a.entries, []byte("\n"))
}

// add copies other's entries into a.
func (a *answers) add(other *answers) {
	other.mu.Lock()
	es := append([][]byte(nil), other.entries...)
	other.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, es...)
}

// sweep checks every answer for l's canaries.
func (a *answers) sweep(t *testing.T, l *leakcheck.Checker, sink string) {
	t.Helper()
	a.mu.Lock()
	es := append([][]byte(nil), a.entries...)
	a.mu.Unlock()
	for _, e := range es {
		l.Answer(t, sink, e)
	}
}

// syncBuffer collects a process's or a logger's output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
