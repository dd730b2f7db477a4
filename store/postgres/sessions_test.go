package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/broker/sessionstoretest"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
)

// TestSessionStoreConformance runs broker/sessionstoretest (sessions,
// grants, the one-purchase claim racing on several connections) against a
// real Postgres.
func TestSessionStoreConformance(t *testing.T) {
	sessionstoretest.Run(t, func(t *testing.T) broker.SessionStore { return openTemp(t) })
}

// TestNotifierAcrossPools: an event sent through one pool reaches the
// listener of another pool on the same schema, and not a listener on
// another schema (deployments sharing a database do not hear each other).
func TestNotifierAcrossPools(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(dsn string) *postgres.Store {
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b, other := open(dsn), open(dsn), open(pgtest.DSN(t))
	got, stray := make(chan broker.Event, 16), make(chan broker.Event, 16)
	listen := func(s *postgres.Store, ch chan broker.Event) {
		ready := make(chan struct{})
		go s.Notifier().Listen(ctx, ready, func(ev broker.Event) {
			if ev.Type != broker.EventResync {
				ch <- ev
			}
		})
		<-ready
	}
	listen(b, got)
	listen(other, stray)
	if err := a.Notifier().Notify(ctx, broker.Event{Type: broker.EventSessionEnded, Session: "s_1", From: "b_a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if ev.Type != broker.EventSessionEnded || ev.Session != "s_1" || ev.From != "b_a" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	// A marker through the other schema proves its listener works and got
	// nothing before it.
	if err := other.Notifier().Notify(ctx, broker.Event{Type: broker.EventGrant, Session: "marker"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-stray:
		if ev.Session != "marker" {
			t.Fatalf("another schema's listener heard %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no marker within 10 s")
	}
}
