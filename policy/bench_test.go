package policy

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault/vault/item"
	"golang.org/x/net/publicsuffix"
)

func BenchmarkParseAmount(b *testing.B) {
	for b.Loop() {
		if _, err := ParseAmount("1.234,56 €", ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecideCardNumber(b *testing.B) {
	rates, _ := ParseRates(map[string]string{"EUR/USD": "1.10"})
	e := NewEngine(rates, publicsuffix.EffectiveTLDPlusOne)
	a := baseArgs()
	a.Field = item.FieldNumber
	a.Card.PerPurchaseCap = amt("100.00 USD")
	a.Card.DailyCap = amt("500.00 USD")
	a.Card.ApprovalThreshold = amt("50.00 USD")
	a.Total = amt("30.00 EUR")
	ctx := context.Background()
	for b.Loop() {
		if d := e.Decide(ctx, a); !d.Allow {
			b.Fatal(d.Message)
		}
	}
}
