package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentvault/agentvault/broker"
	"github.com/jackc/pgx/v5"
)

// Notifier carries broker.Events between the proxyd replicas sharing this
// database: NOTIFY through the pool, LISTEN on one connection of its own
// per replica, reconnecting with a growing pause; after each (re)connection
// the broker is told to re-read what it may have missed (EventResync). The
// channel is per schema, so deployments (and tests) sharing a database do
// not hear each other.
type Notifier struct {
	s  *Store
	mu sync.Mutex
	ch string // the channel, once known
}

// Notifier returns the store's event channel between replicas.
func (s *Store) Notifier() *Notifier { return &Notifier{s: s} }

// channel names the schema's channel: NOTIFY channels are per database.
func (n *Notifier) channel(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != "" {
		return n.ch, nil
	}
	var schema string
	if err := q.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return "", err
	}
	ch := "agentvault_events_" + schema
	if len(ch) > 63 { // NAMEDATALEN - 1
		ch = ch[:63]
	}
	n.ch = ch
	return ch, nil
}

// Notify implements broker.Notifier. An event names sessions, items and
// hosts, never a value.
func (n *Notifier) Notify(ctx context.Context, ev broker.Event) error {
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ch, err := n.channel(ctx, n.s.pool)
	if err != nil {
		return dbErr(err, "notify")
	}
	_, err = n.s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, ch, string(payload))
	return dbErr(err, "notify")
}

// Listen implements broker.Notifier.
func (n *Notifier) Listen(ctx context.Context, ready chan<- struct{}, fn func(broker.Event)) {
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listen(ctx, &ready, fn)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			fn(broker.Event{Type: broker.EventDisconnected})
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(pause*2, 2*time.Second)
	}
	if ready != nil {
		close(ready) // never listened: do not keep the caller waiting
	}
}

func (n *Notifier) listen(ctx context.Context, ready *chan<- struct{}, fn func(broker.Event)) error {
	cfg := n.s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ch, err := n.channel(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{ch}.Sanitize()); err != nil {
		return err
	}
	fn(broker.Event{Type: broker.EventResync})
	if *ready != nil {
		close(*ready)
		*ready = nil
	}
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var ev broker.Event
		if json.Unmarshal([]byte(note.Payload), &ev) != nil || ev.Type == broker.EventResync || ev.Type == broker.EventDisconnected {
			continue
		}
		fn(ev)
	}
}

var _ broker.Notifier = (*Notifier)(nil)
