package hosted

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// revocableKeys answers like proxyd: a key is good until it is revoked.
type revocableKeys struct {
	mu      sync.Mutex
	revoked bool
	asked   int
}

func (k *revocableKeys) AuthenticateKey(ctx context.Context, key string) (control.KeyInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asked++
	if k.revoked {
		return control.KeyInfo{}, agentvault.Errorf(agentvault.CodeKeyRevoked, "the API key was revoked")
	}
	return control.KeyInfo{ID: "key_1", Name: "app"}, nil
}

// TestP21_RevokedKeyRefusedWithinASecond: the hosted server trusts a
// checked key for under a second; after the owner revokes it, the next
// call past that asks proxyd again and is refused.
func TestP21_RevokedKeyRefusedWithinASecond(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	keys := &revocableKeys{}
	kc := &keyCache{keys: keys, now: clock.now, seen: map[[32]byte]keySeen{}}
	if _, err := kc.verify(context.Background(), "avk_x", nil); err != nil {
		t.Fatal(err)
	}
	keys.mu.Lock()
	keys.revoked = true
	keys.mu.Unlock()
	clock.add(keyCacheFor - time.Millisecond)
	if _, err := kc.verify(context.Background(), "avk_x", nil); err != nil {
		t.Fatalf("within the cache window: %v", err)
	}
	clock.add(time.Millisecond)
	if _, err := kc.verify(context.Background(), "avk_x", nil); err == nil || !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("revoked key still accepted after %v: %v", keyCacheFor, err)
	}
	if keyCacheFor > time.Second {
		t.Fatalf("a checked key is trusted for %v, more than a second", keyCacheFor)
	}
}
