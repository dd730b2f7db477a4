package policy

import (
	"context"
	"sync"

	"github.com/agentvault/agentvault"
)

// Caps are a card's spending limits, all in the card's currency. A nil cap
// is no limit.
type Caps struct {
	PerPurchase *Amount
	Daily       *Amount
	Monthly     *Amount
}

// Reservation asks a Ledger to count one purchase against a card's caps.
type Reservation struct {
	// ID names the authorization the purchase belongs to. Reserving the same
	// ID twice counts it once (P18: never twice for one authorization, P20:
	// a retried call does not spend again).
	ID     string
	CardID string
	Amount Amount // in the caps' currency (convert first with Rates)
	Day    string // the owner's calendar day, "2026-11-30"
	Month  string // the owner's calendar month, "2026-11"
	Caps   Caps
}

// Ledger counts spending per card across sessions. Reserve checks the caps
// and records the amount in one transaction: two sessions racing for the
// last of a cap cannot both win. Implementations: MemLedger here, the
// SQLite one in the store.
type Ledger interface {
	Reserve(ctx context.Context, r Reservation) error
	// Cancel gives back a reservation whose release did not happen (the
	// substitution failed before the number left). Unknown IDs are a no-op.
	Cancel(ctx context.Context, id string) error
	// Spent reports what a card has reserved on a day and in a month, in
	// currency.
	Spent(ctx context.Context, cardID, day, month, currency string) (today, thisMonth Amount, err error)
}

// CheckCaps is the cap arithmetic every Ledger shares: it returns the code
// of the first cap that amount would break, given what is already spent.
// All amounts must share one currency; a cap in another currency is
// CodeAmountUnconvertible.
func CheckCaps(amount, spentToday, spentMonth Amount, caps Caps) error {
	if amount.Minor < 0 {
		return agentvault.Errorf(agentvault.CodeAmountUnknown, "negative amount")
	}
	check := func(limit *Amount, spent Amount, code agentvault.Code, what string) error {
		if limit == nil {
			return nil
		}
		total, err := spent.Add(amount)
		if err != nil {
			return err
		}
		c, err := total.Cmp(*limit)
		if err != nil {
			return err
		}
		if c > 0 {
			return agentvault.Errorf(code, "the card's %s limit would be exceeded", what)
		}
		return nil
	}
	zero := Amount{Currency: amount.Currency}
	if err := check(caps.PerPurchase, zero, agentvault.CodeLimitReached, "per-purchase"); err != nil {
		return err
	}
	if err := check(caps.Daily, withCurrency(spentToday, amount.Currency), agentvault.CodeDailyLimit, "daily"); err != nil {
		return err
	}
	return check(caps.Monthly, withCurrency(spentMonth, amount.Currency), agentvault.CodeMonthlyLimit, "monthly")
}

// withCurrency gives a zero Amount the currency it is compared in.
func withCurrency(a Amount, cur string) Amount {
	if a.IsZero() {
		return Amount{Currency: cur}
	}
	return a
}

// MemLedger is an in-memory Ledger guarded by one mutex. It is for tests and
// single-process setups; it forgets everything on restart.
type MemLedger struct {
	mu      sync.Mutex
	entries map[string]Reservation // by reservation ID
	day     map[[3]string]int64    // card, day, currency -> minor units
	month   map[[3]string]int64    // card, month, currency -> minor units
}

// NewMemLedger returns an empty ledger.
func NewMemLedger() *MemLedger {
	return &MemLedger{
		entries: make(map[string]Reservation),
		day:     make(map[[3]string]int64),
		month:   make(map[[3]string]int64),
	}
}

// Reserve implements Ledger.
func (l *MemLedger) Reserve(ctx context.Context, r Reservation) error {
	if err := ctx.Err(); err != nil {
		return agentvault.Wrap(agentvault.CodeTimeout, err, "reservation cancelled")
	}
	if r.ID == "" || r.CardID == "" || r.Day == "" || r.Month == "" || r.Amount.Currency == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "incomplete reservation")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.entries[r.ID]; ok {
		if prev.CardID != r.CardID || prev.Amount != r.Amount {
			return agentvault.Errorf(agentvault.CodeConflict, "reservation id reused for another purchase")
		}
		return nil
	}
	dk := [3]string{r.CardID, r.Day, r.Amount.Currency}
	mk := [3]string{r.CardID, r.Month, r.Amount.Currency}
	today := Amount{Minor: l.day[dk], Currency: r.Amount.Currency}
	month := Amount{Minor: l.month[mk], Currency: r.Amount.Currency}
	if err := CheckCaps(r.Amount, today, month, r.Caps); err != nil {
		return err
	}
	l.day[dk] += r.Amount.Minor
	l.month[mk] += r.Amount.Minor
	l.entries[r.ID] = r
	return nil
}

// Cancel implements Ledger.
func (l *MemLedger) Cancel(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.entries[id]
	if !ok {
		return nil
	}
	delete(l.entries, id)
	l.day[[3]string{r.CardID, r.Day, r.Amount.Currency}] -= r.Amount.Minor
	l.month[[3]string{r.CardID, r.Month, r.Amount.Currency}] -= r.Amount.Minor
	return nil
}

// Spent implements Ledger.
func (l *MemLedger) Spent(_ context.Context, cardID, day, month, currency string) (Amount, Amount, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Amount{Minor: l.day[[3]string{cardID, day, currency}], Currency: currency},
		Amount{Minor: l.month[[3]string{cardID, month, currency}], Currency: currency}, nil
}

var _ Ledger = (*MemLedger)(nil)
