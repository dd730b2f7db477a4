package intercept_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestShutdownLetsInFlightRequestsFinish: Shutdown waits for a request the
// upstream is still answering, refuses new CONNECTs, and returns once the
// tunnel is done.
func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	s, pw := e.session()
	c := e.client(s, pw, false)
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.Get(hostURL(up, "shop.test", "/slow"))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{string(b), err}
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- e.srv.Shutdown(ctx)
	}()
	// New tunnels are refused while shutting down (the listener is closed).
	waitFor(t, func() bool {
		_, err := http.Get("http://" + e.addr + "/")
		return err != nil
	})
	close(release)
	r := <-done
	if r.err != nil || r.body != "finished" {
		t.Fatalf("in-flight request: %q %v", r.body, r.err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
