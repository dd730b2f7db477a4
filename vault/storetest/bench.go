package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault/vault"
)

// BenchmarkAuditRelease measures vault releases with a durable audit
// record each (vault.Release: read the item, open the value, append the
// audit record and wait until it is committed) against the store open
// returns, with 1 and 64 concurrent releasers. It reports releases/s and,
// when the store says, audit records per commit. Store packages call it
// from their own BenchmarkAuditRelease (one benchmark, every store).
func BenchmarkAuditRelease(b *testing.B, open func(b *testing.B) vault.Store) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("releasers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st := open(b)
			key := make([]byte, 32)
			rand.Read(key)
			v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key})
			if err != nil {
				b.Fatal(err)
			}
			c, err := v.AddCard(ctx, "o", "owner", vault.CardInput{
				Number: vault.NewSecret([]byte(strings.Repeat("4242", 4))), CVV: vault.NewSecret([]byte("123")),
				ExpiryMonth: 12, ExpiryYear: 2030, Sites: []string{"shop.example.com"}})
			if err != nil {
				b.Fatal(err)
			}
			args := vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber,
				Destination: "shop.example.com", Session: "s_bench", Actor: "bench", Purpose: "substitution"}
			before := auditCount(ctx, b, st)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						s, err := v.Release(ctx, args)
						if err != nil {
							b.Error(err)
							return
						}
						s.Wipe()
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "releases/s")
			if got := auditCount(ctx, b, st) - before; got != b.N {
				b.Fatalf("%d audit records for %d releases", got, b.N)
			}
			if cs, ok := st.(interface{ AuditCommits() (int64, int64) }); ok {
				if commits, items := cs.AuditCommits(); commits > 0 {
					b.ReportMetric(float64(items)/float64(commits), "records/commit")
				}
			}
		})
	}
}

func auditCount(ctx context.Context, b *testing.B, st vault.Store) int {
	rs, err := st.QueryAudit(ctx, vault.AuditFilter{Org: "o", Action: vault.AuditRelease})
	if err != nil {
		b.Fatal(err)
	}
	return len(rs)
}
