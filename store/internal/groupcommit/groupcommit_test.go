package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// TestP12_EveryCallerAnsweredAfterItsCommit: many concurrent callers each
// get their own result, only from a commit that held their record, and
// commits are shared (fewer commits than records while callers queue).
func TestP12_EveryCallerAnsweredAfterItsCommit(t *testing.T) {
	var mu sync.Mutex
	committed := map[int]bool{}
	release := make(chan struct{})
	first := true
	const n = 50
	var w *Writer[int, int]
	w = New(func(ctx context.Context, items []int) ([]int, error) {
		mu.Lock()
		wasFirst := first
		first = false
		mu.Unlock()
		if wasFirst {
			<-release // hold the first commit until every caller waits
			for w.waiting.Load() < n {
				runtime.Gosched()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		out := make([]int, len(items))
		for i, it := range items {
			committed[it] = true
			out[i] = it * 10
		}
		return out, nil
	}, 64)
	defer w.Close()
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			r, err := w.Do(context.Background(), i)
			if err != nil || r != i*10 {
				t.Errorf("Do(%d) = %d, %v", i, r, err)
			}
			mu.Lock()
			ok := committed[i]
			mu.Unlock()
			if !ok {
				t.Errorf("Do(%d) returned before its record was committed", i)
			}
		}()
	}
	for range n {
		<-started
	}
	close(release)
	wg.Wait()
	commits, items := w.Stats()
	if items != n || commits >= n {
		t.Fatalf("%d records in %d commits; want %d records sharing fewer commits", items, commits, n)
	}
}

// TestP12_FailedCommitFailsOnlyItsRecord: a batch that fails is retried
// one record at a time, so only the bad record's caller gets the error,
// and nobody gets success for a record that was not committed.
func TestP12_FailedCommitFailsOnlyItsRecord(t *testing.T) {
	bad := errors.New("injected")
	w := New(func(ctx context.Context, items []int) ([]int, error) {
		for _, it := range items {
			if it == 7 {
				return nil, bad
			}
		}
		return items, nil
	}, 64)
	defer w.Close()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.Do(context.Background(), i)
			if (i == 7) != errors.Is(err, bad) {
				t.Errorf("Do(%d): %v", i, err)
			}
		}()
	}
	wg.Wait()
}

func TestClosedRefuses(t *testing.T) {
	w := New(func(ctx context.Context, items []int) ([]int, error) { return items, nil }, 1)
	w.Close()
	w.Close()
	if _, err := w.Do(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

// TestRunIsOnTheWriterBetweenCommits: work handed to Run shares the
// commit function's unguarded state with it (the race detector would see
// two goroutines), runs while no commit is in flight, counts no commit,
// and every record sent meanwhile is still committed and answered.
func TestRunIsOnTheWriterBetweenCommits(t *testing.T) {
	var inCommit bool
	state := 0 // touched by commits and by Run's work, never locked
	w := New(func(ctx context.Context, items []int) ([]int, error) {
		inCommit = true
		state += len(items)
		inCommit = false
		return items, nil
	}, 8)
	defer w.Close()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := w.Do(context.Background(), i); err != nil || got != i {
				t.Errorf("Do(%d) = %d, %v", i, got, err)
			}
		}()
	}
	runs := 0
	for range 20 {
		if err := w.Run(context.Background(), func() {
			if inCommit {
				t.Error("Run's work ran inside a commit")
			}
			state += 1000
			runs++
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := w.Run(context.Background(), func() {}); err != nil { // after every commit above
		t.Fatal(err)
	}
	_, items := w.Stats()
	if runs != 20 || items != 40 || state != 20*1000+40 {
		t.Fatalf("runs %d, items %d, state %d", runs, items, state)
	}
	w.Close()
	if err := w.Run(context.Background(), func() { t.Error("ran after Close") }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
}
