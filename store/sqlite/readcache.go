package sqlite

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// The read cache. A purchase re-reads the same owner state (the agent's
// API key, the card's policy, the destinations, the approvals) and vault
// items on every authorize and every release, because the owner's revoke,
// pause or site removal must stop the very next release (P21). Those rows
// change seldom, and other processes write them (the owner CLI opens this
// file directly), so a cache here is only exact if it notices a change
// made by ANY writer. It does so through the schema: migration 72 adds a
// one-row table store_version and triggers on every table a cached method
// reads; each insert, update or delete of one of their rows adds 1 to the
// version, inside the writer's own transaction, whichever process or
// binary the writer is. A cached call reads the version (one prepared
// point query, the cheapest statement there is) and uses its entries only
// if they were read under that same version.
//
// The purchase path writes none of the versioned tables (audit, ledger,
// ledger_totals, proxy_sessions, proxy_grants, refusals are not
// versioned), so purchases do not empty the cache. A purchase that raises
// an approval writes approvals (CreateApproval), and the approval sweep
// writes it when a pending approval expires: those do empty it, as any
// owner decision does.

// storeVersionMigration is the version of the migration below.
const storeVersionMigration = 72

// versionedTables are the tables whose rows the cached methods return:
// GetAPIKey (api_keys), GetCardPolicy (card_policies), ListDestinations
// (destinations), ListApprovals (approvals), GetItem and GetItemByLabel
// (items LEFT JOIN item_values). This list is part of the shipped
// migration 72: never change it; a new versioned table is a new migration.
var versionedTables = []string{"api_keys", "card_policies", "destinations", "approvals", "items", "item_values"}

func init() {
	var b strings.Builder
	b.WriteString(`
CREATE TABLE store_version (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	v  INTEGER NOT NULL
);
INSERT INTO store_version (id, v) VALUES (1, 0);
`)
	for _, t := range versionedTables {
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			b.WriteString("CREATE TRIGGER store_version_" + t + "_" + strings.ToLower(op) +
				" AFTER " + op + " ON " + t + " BEGIN\n\tUPDATE store_version SET v = v + 1 WHERE id = 1;\nEND;\n")
		}
	}
	numberedMigrations[storeVersionMigration] = b.String()
}

// qStoreVersion reads the version (prepared with the hot queries).
const qStoreVersion = `SELECT v FROM store_version WHERE id = 1`

// maxCacheEntries bounds the cache: when full it is emptied.
const maxCacheEntries = 4096

// Kinds of cached call, the first part of a cacheKey.
const (
	cacheAPIKey uint8 = iota + 1
	cacheCardPolicy
	cacheDestinations
	cacheApprovals
	cacheItemByID
	cacheItemByLabel
)

// cacheKey names one cached call by its method and arguments.
type cacheKey struct {
	kind       uint8
	a, b, c, d string
	n          int
}

// readCache holds, for one version of the file, what the cached methods
// returned. Entries are deep copies no caller holds; they are never
// changed after they are stored, and every hit hands out a new copy.
type readCache struct {
	mu    sync.Mutex
	v     int64
	valid bool // v was read from the file
	m     map[cacheKey]any
	stats cacheStats
}

// cacheStats counts the cache's work (tests and benchmarks).
type cacheStats struct {
	Hits, Misses int64
	// Flushes counts the times the cache was emptied because the version
	// moved (or, in Full, because it was full).
	Flushes, Full int64
	// VersionReads counts the version queries (one per cached call, or
	// one per vault.ReadScope).
	VersionReads int64
}

// lookup returns the entry for k read under version v. A newer v than the
// cache's empties the cache and makes v its version; an older one (a
// decision's scope that began before the last write) finds nothing and
// leaves the cache as it is. Entries read under any other version are
// never returned.
func (c *readCache) lookup(v int64, k cacheKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.valid && v < c.v {
		// A decision that read an older version (vault.ReadScope) while
		// the cache moved on: it reads the file, and the cache stays.
		c.stats.Misses++
		return nil, false
	}
	if !c.valid || c.v != v {
		if len(c.m) > 0 {
			c.stats.Flushes++
		}
		clear(c.m)
		c.v, c.valid = v, true
	}
	e, ok := c.m[k]
	if ok {
		c.stats.Hits++
	} else {
		c.stats.Misses++
	}
	return e, ok
}

// store keeps e for k if the cache is still at version v (the data was
// read after v was: it is at least as new as v; a caller that read an
// older version than the cache's now holds stores nothing).
func (c *readCache) store(v int64, k cacheKey, e any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.valid || c.v != v {
		return
	}
	if c.m == nil {
		c.m = make(map[cacheKey]any)
	}
	if len(c.m) >= maxCacheEntries {
		clear(c.m)
		c.stats.Full++
	}
	c.m[k] = e
}

func (c *readCache) snapshot() cacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// storeVersion reads the file's version.
func (s *Store) storeVersion(ctx context.Context) (int64, error) {
	if s.h != nil {
		c := &s.h.cache
		c.mu.Lock()
		c.stats.VersionReads++
		c.mu.Unlock()
	}
	var v int64
	err := s.queryRow(ctx, qStoreVersion).Scan(&v)
	return v, err
}

// notFound is a cache entry for a row that is not there (vault.ErrNotFound
// from load): as exact as any entry, since adding the row moves the
// version. A card without spending rules has no card_policies row, and
// every purchase asks for it (7% of a purchase's CPU when each ask read
// the file).
type notFound struct{ err error }

// cached returns load's result through the handle's read cache: the
// version is read first, then, on a miss, the data, which is stored (a
// copy) under that version. A not-found answer is cached too; any other
// error is not. Every result handed out is a copy of its own (clone).
func cached[T any](ctx context.Context, s *Store, k cacheKey, clone func(T) T, load func() (T, error)) (T, error) {
	if s.h == nil {
		return load()
	}
	var v int64
	var err error
	if sc := vault.ReadScopeFrom(ctx); sc != nil {
		// One version read per decision (vault.ReadScope).
		v, err = sc.Version(func() (int64, error) { return s.storeVersion(ctx) })
	} else {
		v, err = s.storeVersion(ctx)
	}
	if err != nil {
		return load() // no version, no cache: the query itself decides
	}
	c := &s.h.cache
	if e, ok := c.lookup(v, k); ok {
		if nf, ok := e.(notFound); ok {
			var zero T
			return zero, nf.err
		}
		return clone(e.(T)), nil
	}
	out, err := load()
	if errors.Is(err, vault.ErrNotFound) {
		c.store(v, k, notFound{err})
	}
	if err != nil {
		return out, err
	}
	c.store(v, k, clone(out))
	return out, nil
}

// readCacheStats reports the handle's cache counters.
func (s *Store) readCacheStats() cacheStats {
	if s.h == nil {
		return cacheStats{}
	}
	return s.h.cache.snapshot()
}

// ---- deep copies ----

func cloneItem(r vault.ItemRecord) vault.ItemRecord {
	r.Fields = slices.Clone(r.Fields)
	r.WrappedKey = bytes.Clone(r.WrappedKey)
	r.Meta = bytes.Clone(r.Meta)
	if r.Values != nil {
		vals := make(map[vault.Field][]byte, len(r.Values))
		for f, v := range r.Values {
			vals[f] = bytes.Clone(v)
		}
		r.Values = vals
	}
	return r
}

func cloneAPIKey(k owner.APIKey) owner.APIKey {
	k.SecretHash = bytes.Clone(k.SecretHash)
	k.Scope.CardIDs = slices.Clone(k.Scope.CardIDs)
	k.Scope.LoginIDs = slices.Clone(k.Scope.LoginIDs)
	return k
}

func cloneAmount(a *policy.Amount) *policy.Amount {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}

func cloneCardPolicy(p owner.CardPolicy) owner.CardPolicy {
	r := &p.Rules
	r.BlockedMerchants = slices.Clone(r.BlockedMerchants)
	r.PerPurchaseCap = cloneAmount(r.PerPurchaseCap)
	r.DailyCap = cloneAmount(r.DailyCap)
	r.MonthlyCap = cloneAmount(r.MonthlyCap)
	r.ApprovalThreshold = cloneAmount(r.ApprovalThreshold)
	return p
}

// cloneDestinations: a Destination holds strings and a time only.
func cloneDestinations(ds []owner.Destination) []owner.Destination { return slices.Clone(ds) }

func cloneApprovals(as []owner.Approval) []owner.Approval {
	out := slices.Clone(as)
	for i := range out {
		out[i].Amount = cloneAmount(out[i].Amount)
	}
	return out
}
