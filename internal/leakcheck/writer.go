package leakcheck

import (
	"bytes"
	"sync"
	"testing"
)

// LogWriter is a log sink that checks each line as it is written and keeps
// nothing but a partial line and what it found: for long runs (a soak)
// whose logs must not grow a buffer the run would measure.
type LogWriter struct {
	c    *Checker
	sink string

	mu      sync.Mutex
	partial []byte
	lines   int
	found   []Finding
}

// LogWriter returns a writer that checks log lines for c's canaries.
func (c *Checker) LogWriter(sink string) *LogWriter {
	return &LogWriter{c: c, sink: sink}
}

func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data := p
	if len(w.partial) > 0 {
		data = append(w.partial, p...)
	}
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		w.partial = append(w.partial[:0], data...)
		return len(p), nil
	}
	w.lines += bytes.Count(data[:last+1], []byte("\n"))
	if len(w.found) < 10 {
		w.found = append(w.found, w.c.Find(Logs, w.sink, data[:last+1])...)
	}
	w.partial = append(w.partial[:0], data[last+1:]...)
	return len(p), nil
}

// Lines is how many whole lines were checked.
func (w *LogWriter) Lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}

// Check reports what the writer found, and fails when no line was written
// at all (a check that saw nothing proves nothing).
func (w *LogWriter) Check(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.found = append(w.found, w.c.Find(Logs, w.sink, w.partial)...)
		w.partial = nil
	}
	for _, f := range w.found {
		t.Error(f.String())
	}
	if w.lines == 0 {
		t.Errorf("%s: no log line was written, so the leak check saw nothing", w.sink)
	}
}
