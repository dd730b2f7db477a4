package policy

import (
	"math/big"
	"sort"
	"strings"

	"github.com/agentvault/agentvault"
)

// Rates is the owner's conversion table: exact rationals read from config
// strings, never floats. A pair is stored one way ("EUR/USD" = "1.08" means
// one euro buys 1.08 dollars) and used both ways. The zero Rates converts
// nothing but a currency into itself.
type Rates struct {
	m map[[2]string]*big.Rat
}

// ParseRates reads a table such as {"EUR/USD": "1.0825", "GBP/EUR": "1.17"}.
// A malformed pair, an unknown currency, or a rate that is not a positive
// decimal (or fraction, "27/25") refuses the whole table, so a bad config
// fails start-up instead of converting wrongly.
func ParseRates(table map[string]string) (Rates, error) {
	r := Rates{m: make(map[[2]string]*big.Rat, len(table))}
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		from, to, ok := strings.Cut(strings.ToUpper(strings.TrimSpace(k)), "/")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == to {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q: want FROM/TO", k)
		}
		if _, ok := currencyExp[from]; !ok {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q: unknown currency %s", k, from)
		}
		if _, ok := currencyExp[to]; !ok {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q: unknown currency %s", k, to)
		}
		v := strings.TrimSpace(table[k])
		if len(v) > 64 {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q: value too long", k)
		}
		q, ok := new(big.Rat).SetString(v)
		if !ok || q.Sign() <= 0 || strings.ContainsAny(v, "eE") {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q: want a positive decimal", k)
		}
		if _, dup := r.m[[2]string{from, to}]; dup {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q given twice", k)
		}
		if _, dup := r.m[[2]string{to, from}]; dup {
			return Rates{}, agentvault.Errorf(agentvault.CodeInvalidInput, "rate %q conflicts with its inverse", k)
		}
		r.m[[2]string{from, to}] = q
	}
	return r, nil
}

// rate returns how many units of to one unit of from buys.
func (r Rates) rate(from, to string) (*big.Rat, bool) {
	if q, ok := r.m[[2]string{from, to}]; ok {
		return q, true
	}
	if q, ok := r.m[[2]string{to, from}]; ok {
		return new(big.Rat).Inv(q), true
	}
	return nil, false
}

// Convert expresses a in currency to. The result is rounded up to the
// target's minor unit: a spending check that errs, errs against spending.
// A pair the table does not hold is CodeAmountUnconvertible; the table is
// not chained through a third currency, so what the owner wrote is what
// applies.
func (r Rates) Convert(a Amount, to string) (Amount, error) {
	to = strings.ToUpper(to)
	if a.Currency == to {
		return a, nil
	}
	exp, ok := currencyExp[to]
	if !ok {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnconvertible, "unknown currency %s", to)
	}
	q, ok := r.rate(a.Currency, to)
	if !ok {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnconvertible, "no rate from %s to %s", a.Currency, to)
	}
	quo := ceilScaled(new(big.Rat).Mul(a.Rat(), q), exp)
	if !quo.IsInt64() || quo.Int64() > maxMinor*100+99 { // 17 digits at most
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnconvertible, "converted amount too large")
	}
	return Amount{Minor: quo.Int64(), Currency: to}, nil
}
