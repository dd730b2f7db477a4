package sqlite

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
	_ "unsafe" // go:linkname

	"modernc.org/memory"
)

// SQLite's C heap (page caches, parsed schemas, statements) is served by
// modernc.org/libc's allocator, a modernc.org/memory.Allocator. That
// allocator keeps the regions a load emptied for reuse, up to its
// high-water mark plus 4 MiB, and libc does not export its Trim: after
// a burst of concurrent purchases has opened and then closed tens of
// connections, their freed page caches stay resident (measured: 14 MiB of
// anonymous memory, 5 MiB once trimmed). ReleaseMemory reaches the
// allocator and its lock by name.
//
// The names and types are those of the libc version below (libc_musl.go:
// `allocator memory.Allocator`, `allocatorMu sync.Mutex`). A link name
// does not check types, so the trim runs only when the binary was built
// with exactly that version; TestReleaseMemory fails on any other, so an
// upgrade re-checks the layout before it lands.

// verifiedLibc is the modernc.org/libc version whose allocator layout
// ReleaseMemory was checked against.
const verifiedLibc = "v1.80.1"

//go:linkname libcAllocator modernc.org/libc.allocator
var libcAllocator memory.Allocator

//go:linkname libcAllocatorMu modernc.org/libc.allocatorMu
var libcAllocatorMu sync.Mutex

// linkedLibc is the modernc.org/libc version linked into this binary
// ("" when the build carries no module information, as a test binary
// does: the package's test reads go.mod instead).
var linkedLibc = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "modernc.org/libc" {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
})

// releaseWait bounds how long ReleaseMemory waits for the durable
// writer to close its connection (behind a commit in flight).
const releaseWait = 5 * time.Second

// ReleaseMemory hands the regions SQLite's C heap freed, and the
// allocator kept for reuse, back to the operating system. Memory still in
// use (open connections' caches) is untouched; the next allocation maps
// what it needs again. For an idle process: the call takes the allocator's
// lock, so every SQLite call waits for it. It reports whether it trimmed
// (false when the linked libc is not the verified version).
func ReleaseMemory() bool {
	if linkedLibc() != verifiedLibc {
		return false
	}
	libcAllocatorMu.Lock()
	defer libcAllocatorMu.Unlock()
	_ = libcAllocator.Trim() // best effort: a failed munmap leaves that region mapped
	return true
}

// ReleaseMemory closes the store's idle connections and the durable
// writer's own (the next call, or the next record, opens one again: about
// a millisecond, the schema parsed once more) and then hands the C heap
// they and earlier loads freed back to the operating system. For a process
// that has been idle a while: pool connections close on their own a minute
// after their last use, and a pool warmed by a burst holds tens of them
// with their page caches until then; the writer's stays open for good, its
// page cache holding every page the last load's commits touched (4 MiB
// after a few thousand audit records).
func (s *Store) ReleaseMemory() bool {
	if s.h != nil && s.h.durable != nil {
		// The connection is the writer goroutine's: it closes it, between
		// two commits.
		ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
		_ = s.h.durable.Run(ctx, s.h.dropWriterConn)
		cancel()
	}
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(maxIdleConns)
	return ReleaseMemory()
}
