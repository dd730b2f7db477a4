package browser

import (
	"net/url"
	"sync"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// The network log (seed 004 get_network_log): a diagnostic of the current
// page's document, xhr and fetch requests. Only method, host, path, status
// and time are kept: never a query, a header or a body. The caller decides
// how much of the host and path an agent may see (none after a fill).

// NetEntry is one request of the log.
type NetEntry struct {
	Method string
	Host   string
	Path   string
	Status int // 0: the request failed
	At     time.Time
}

const netLogMax = 25

type netLog struct {
	mu      sync.Mutex
	entries map[playwright.Page][]NetEntry
}

// StartNetworkLog records the session's requests from now on.
func (s *Session) StartNetworkLog() {
	s.mu.Lock()
	if s.netlog != nil {
		s.mu.Unlock()
		return
	}
	nl := &netLog{entries: map[playwright.Page][]NetEntry{}}
	s.netlog = nl
	s.mu.Unlock()
	add := func(r playwright.Request, status int) {
		switch r.ResourceType() {
		case "document", "xhr", "fetch":
		default:
			return
		}
		u, err := url.Parse(r.URL())
		if err != nil {
			return
		}
		var p playwright.Page
		func() {
			defer func() { _ = recover() }() // a worker's request has no frame
			if f := r.Frame(); f != nil {
				p = f.Page()
			}
		}()
		if p == nil {
			return
		}
		e := NetEntry{Method: r.Method(), Host: u.Host, Path: u.EscapedPath(), Status: status, At: time.Now()}
		nl.mu.Lock()
		l := append(nl.entries[p], e)
		if len(l) > netLogMax {
			l = l[len(l)-netLogMax:]
		}
		nl.entries[p] = l
		nl.mu.Unlock()
	}
	s.ctx.OnResponse(func(r playwright.Response) { add(r.Request(), r.Status()) })
	s.ctx.OnRequestFailed(func(r playwright.Request) { add(r, 0) })
}

// NetworkLog returns the current page's last requests, oldest first; ok is
// false when the log was never started.
func (s *Session) NetworkLog() (entries []NetEntry, ok bool) {
	s.mu.Lock()
	nl := s.netlog
	s.mu.Unlock()
	if nl == nil {
		return nil, false
	}
	p, err := s.page()
	if err != nil {
		return nil, true
	}
	nl.mu.Lock()
	defer nl.mu.Unlock()
	return append([]NetEntry(nil), nl.entries[p]...), true
}
