package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Describe names the database dsn points at, for messages an operator
// reads ("Postgres store agentvault@db.internal:5432/agentvault"): user,
// host, port and database, never the password or other parameters.
func Describe(dsn string) string {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return "Postgres store (store.dsn does not parse)"
	}
	c := cfg.ConnConfig
	host := c.Host
	if c.Port != 0 {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	}
	who := ""
	if c.User != "" {
		who = c.User + "@"
	}
	return fmt.Sprintf("Postgres store %s%s/%s", who, host, c.Database)
}

// connReason is the short reason a connection failed: the server's
// message, or the network's, without the DSN.
func connReason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "host " + de.Name + " does not resolve"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return ""
}

// Health is what Inspect reads of a Postgres store without changing it.
type Health struct {
	ServerVersion string
	// Fsync and SynchronousCommit are the server's settings as this
	// connection sees them.
	Fsync, SynchronousCommit string
	// SchemaVersion is the highest applied migration; 0 when the schema
	// was never created.
	SchemaVersion int
}

// Durable is nil when the settings are what the store requires (Open
// refuses every connection otherwise).
func (h Health) Durable() error { return durable(h.Fsync, h.SynchronousCommit) }

// Inspect connects once to dsn and reads the server's durability settings
// and the schema version, applying nothing (Open migrates; Inspect is for
// proxyd doctor, which changes nothing). Its errors never repeat the DSN.
func Inspect(ctx context.Context, dsn string) (Health, error) {
	var h Health
	if err := ValidateDSN(dsn); err != nil {
		return h, err
	}
	cfg, _ := pgxpool.ParseConfig(dsn)
	c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return h, connErr(err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var migrated bool
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'),
		to_regclass('schema_migrations') IS NOT NULL`).Scan(&h.ServerVersion, &h.Fsync, &h.SynchronousCommit, &migrated); err != nil {
		return h, dbErr(err, "read the server's settings")
	}
	if migrated {
		var v *int64
		if err := c.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil {
			return h, dbErr(err, "read schema version")
		}
		if v != nil {
			h.SchemaVersion = int(*v)
		}
	}
	return h, nil
}
