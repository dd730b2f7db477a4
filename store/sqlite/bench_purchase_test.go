package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// BenchmarkPurchaseDurable: what a purchase writes durably, from 1 and 64
// buyers at once: a reservation (its authorize), then an audit record (its
// release). Reports purchases per second and the wall time of one.
func BenchmarkPurchaseDurable(b *testing.B) {
	for _, buyers := range []int{1, 64} {
		b.Run(fmt.Sprintf("buyers=%d", buyers), func(b *testing.B) {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var n atomic.Int64
			next := make(chan struct{})
			go func() {
				defer close(next)
				for range b.N {
					next <- struct{}{}
				}
			}()
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range buyers {
				wg.Go(func() {
					for range next {
						id := fmt.Sprintf("s_%d", n.Add(1))
						if err := s.Reserve(ctx, policy.Reservation{ID: id, CardID: "c1", Day: "2026-12-02", Month: "2026-12",
							Amount: policy.Amount{Minor: 4200, Currency: "USD"}}); err != nil {
							b.Error(err)
							return
						}
						if _, err := s.AppendAudit(ctx, vault.AuditRecord{Time: time.Now(), Action: vault.AuditRelease, Org: "o",
							ItemID: "c1", Kind: vault.KindCard, Field: vault.FieldNumber, Destination: "shop.example", Session: id,
							ValueHMAC: make([]byte, 32)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "purchases/s")
		})
	}
}
