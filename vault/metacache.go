package vault

import (
	"bytes"
	"slices"
	"sync"
)

// metaCacheMax bounds the opened metadata a Vault keeps; past it the cache
// starts again empty.
const metaCacheMax = 4096

// metaCache keeps the opened metadata of the items read last, so an item
// whose sealed record has not changed is not decrypted and decoded again on
// every authorize and release. An entry answers only for the exact bytes it
// was opened from (org, wrapped data key, sealed metadata): any write to
// the item seals new bytes and misses. Master keys are only ever added to a
// Vault, so bytes that opened once open again to the same metadata. The
// metadata holds no field value (Item's rule).
type metaCache struct {
	mu sync.Mutex
	m  map[string]metaEntry // by item id
}

type metaEntry struct {
	org     string
	wrapped []byte
	sealed  []byte
	meta    itemMeta
}

// get returns a copy of rec's opened metadata, if it was opened from the
// same bytes.
func (c *metaCache) get(rec ItemRecord) (itemMeta, bool) {
	c.mu.Lock()
	e, ok := c.m[rec.ID]
	c.mu.Unlock()
	if !ok || e.org != rec.Org || !bytes.Equal(e.wrapped, rec.WrappedKey) || !bytes.Equal(e.sealed, rec.Meta) {
		return itemMeta{}, false
	}
	return e.meta.clone(), true
}

// put keeps a copy of m, opened from rec.
func (c *metaCache) put(rec ItemRecord, m itemMeta) {
	e := metaEntry{org: rec.Org, wrapped: clone(rec.WrappedKey), sealed: clone(rec.Meta), meta: m.clone()}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= metaCacheMax {
		c.m = map[string]metaEntry{}
	}
	c.m[rec.ID] = e
	c.mu.Unlock()
}

// clone copies m deeply: callers may change the Item they are given.
func (m itemMeta) clone() itemMeta {
	out := m
	if m.Card != nil {
		c := *m.Card
		c.Sites = slices.Clone(c.Sites)
		if c.Billing != nil {
			b := *c.Billing
			c.Billing = &b
		}
		out.Card = &c
	}
	if m.Login != nil {
		l := *m.Login
		if l.Generated != nil {
			g := *l.Generated
			l.Generated = &g
		}
		out.Login = &l
	}
	if m.Identity != nil {
		i := *m.Identity
		out.Identity = &i
	}
	if m.Address != nil {
		a := *m.Address
		out.Address = &a
	}
	return out
}
