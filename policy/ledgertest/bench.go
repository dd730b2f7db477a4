package ledgertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault/policy"
)

// BenchmarkReserve measures reservations per second (each durable, caps
// checked) with 1 and 64 concurrent callers on one card, the case where
// reservations wait for each other. open returns a fresh, empty ledger.
func BenchmarkReserve(b *testing.B, open func(b *testing.B) policy.Ledger) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("reservers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			l := open(b)
			daily := policy.MustAmount("1000000000.00 EUR")
			var next atomic.Int64
			done := make(chan struct{})
			b.ResetTimer()
			for range n {
				go func() {
					defer func() { done <- struct{}{} }()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := l.Reserve(ctx, policy.Reservation{ID: fmt.Sprintf("r%d", i), CardID: "card1",
							Amount: policy.MustAmount("1.00 EUR"), Day: "2026-11-30", Month: "2026-11",
							Caps: policy.Caps{Daily: &daily}}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			for range n {
				<-done
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
			today, _, err := l.Spent(ctx, "card1", "2026-11-30", "2026-11", "EUR")
			if err != nil {
				b.Fatal(err)
			}
			if today.Minor != int64(b.N)*100 {
				b.Fatalf("%d spent for %d reservations", today.Minor, b.N)
			}
		})
	}
}
