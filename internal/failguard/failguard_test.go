package failguard_test

import (
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/failguard"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestWaitsStartAtTheFreeFailureAndDouble(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := failguard.New(failguard.Config{First: time.Second, Max: 5 * time.Second, Now: c.now})
	for i := 1; i < 3; i++ {
		g.Failed("a", 3)
		if w := g.Wait("a"); w != 0 {
			t.Fatalf("failure %d of 3 free: wait %v, want none", i, w)
		}
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		g.Failed("a", 3)
		if w := g.Wait("a"); w != want {
			t.Fatalf("failure %d: wait %v, want %v", i+3, w, want)
		}
	}
	if w := g.Wait("b"); w != 0 {
		t.Errorf("another key waits %v: one key's failures must never slow another", w)
	}
	if w := g.Wait("b", "a"); w != 5*time.Second {
		t.Errorf("Wait over two keys is %v, want the longest (5s)", w)
	}
	c.t = c.t.Add(5 * time.Second)
	if w := g.Wait("a"); w != 0 {
		t.Errorf("after the wait ran out: %v", w)
	}
	g.Forget("a")
	g.Failed("a", 3)
	if w := g.Wait("a"); w != 0 {
		t.Errorf("a forgotten key starts over, but waits %v", w)
	}
}

func TestIdleKeyStartsOver(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := failguard.New(failguard.Config{First: time.Second, Forget: time.Minute, Now: c.now})
	g.Failed("a", 1)
	if g.Wait("a") == 0 {
		t.Fatal("no wait after the free failure")
	}
	c.t = c.t.Add(2 * time.Minute)
	g.Failed("a", 2)
	if w := g.Wait("a"); w != 0 {
		t.Errorf("a key idle past Forget kept its count (wait %v)", w)
	}
}

func TestKeysAreBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	g := failguard.New(failguard.Config{First: time.Hour, MaxKeys: 3, Now: c.now})
	for _, k := range []string{"a", "b", "c", "d"} {
		c.t = c.t.Add(time.Second)
		g.Failed(k, 1)
	}
	if g.Wait("a") != 0 {
		t.Error("the stalest key was kept past MaxKeys")
	}
	if g.Wait("d") == 0 {
		t.Error("the newest key was dropped")
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"192.0.2.7", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1%eth0]:443", "2001:db8:1:2::/64"},
		{"[::1]:7700", "::/64"},
		{"not an address", "not an address"},
	} {
		if got := failguard.ClientKey(tc.in); got != tc.want {
			t.Errorf("ClientKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
