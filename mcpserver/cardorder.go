package mcpserver

import (
	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/tokens"
)

// Card order (seed 004, "Card order"): expiry and billing first, then the
// card number, then its security code immediately. Filling the number
// authorizes the code that follows it exactly once; the next action (another
// field, a click, a press, a wait that returns) spends that authorization,
// reads do not. The rules are checked over the whole batch before anything is
// typed.

// fieldClass is what the order rules need to know about one field.
type fieldClass struct {
	isToken bool
	kind    string // card, login, identity, address
	field   string // number, cvv, ...
	card    string // label+suffix of a card token: which card
	// cvvSpent: a security code whose number's authorization an action
	// already spent (markSpentCVV); proxyd then asks the owner again.
	cvvSpent bool
}

func (c fieldClass) isNumber() bool { return c.isToken && c.kind == "card" && c.field == "number" }
func (c fieldClass) isCVV() bool    { return c.isToken && c.kind == "card" && c.field == "cvv" }

// classify parses a fill value. A string with the token prefix that does not
// parse is refused: a mistyped token must never be typed as a literal.
func classify(value string) (fieldClass, error) {
	t, err := tokens.Parse(value)
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeInvalidInput {
			return fieldClass{}, nil // not a token: a literal value
		}
		return fieldClass{}, err
	}
	return fieldClass{isToken: true, kind: string(t.Kind), field: string(t.Field), card: t.Label + "_" + t.Suffix}, nil
}

// cardState is the per-session memory the rules need across calls.
type cardState struct {
	// pendingCVV names the card whose number ended the last fill_checkout
	// batch: the next fill_checkout must start with that card's code.
	pendingCVV string
	// numberFilled lists cards whose number was typed in this session.
	numberFilled map[string]bool
}

// checkCardOrder applies the rules to a batch. It returns nil or a
// card_field_order error naming the position; nothing has been typed yet.
func checkCardOrder(st *cardState, batch []fieldClass) error {
	if st.pendingCVV != "" {
		if len(batch) == 0 || !batch[0].isCVV() || batch[0].card != st.pendingCVV {
			return agentvault.Errorf(agentvault.CodeFieldOrder,
				"the last fill_checkout ended on a card number: this call must start with that card's security code token. Nothing was typed.")
		}
	}
	for i, f := range batch {
		if f.isNumber() && i+1 < len(batch) {
			next := batch[i+1]
			if !next.isCVV() || next.card != f.card {
				return agentvault.Errorf(agentvault.CodeFieldOrder,
					"field %d follows the card number but is not that card's security code: put expiry and billing fields before the number and the security code right after it. Nothing was typed.", i+2)
			}
		}
		if f.isCVV() {
			afterNumber := i > 0 && batch[i-1].isNumber() && batch[i-1].card == f.card
			pendingFirst := i == 0 && st.pendingCVV == f.card
			earlier := st.numberFilled[f.card]
			if !afterNumber && !pendingFirst && !earlier {
				return agentvault.Errorf(agentvault.CodeFieldOrder,
					"field %d is a security code with no card number before it: fill the number, then the code right after it. Nothing was typed.", i+1)
			}
		}
	}
	return nil
}

// markSpentCVV marks, before anything is typed, each security code in the
// batch that neither follows its number in the batch nor is the code the
// last batch ended owing: the number's authorization of it was spent, and
// proxyd asks the owner to approve the purchase a second time (seed 004).
func markSpentCVV(st *cardState, batch []fieldClass) {
	for i := range batch {
		f := &batch[i]
		if !f.isCVV() {
			continue
		}
		afterNumber := i > 0 && batch[i-1].isNumber() && batch[i-1].card == f.card
		pendingFirst := i == 0 && st.pendingCVV == f.card
		f.cvvSpent = !afterNumber && !pendingFirst
	}
}

// afterBatch records what a batch that typed its first n fields leaves
// behind for the next call.
func (st *cardState) afterBatch(batch []fieldClass, n int) {
	if st.numberFilled == nil {
		st.numberFilled = map[string]bool{}
	}
	st.pendingCVV = ""
	for i := 0; i < n && i < len(batch); i++ {
		if batch[i].isNumber() {
			st.numberFilled[batch[i].card] = true
		}
	}
	// The last field typed was a number (the batch ended there, or failed
	// on the code right after it): the code is still owed, first thing.
	if n > 0 && n <= len(batch) && batch[n-1].isNumber() {
		st.pendingCVV = batch[n-1].card
	}
}

// action spends a pending security-code authorization: the code is then
// authorized again (the owner is asked again) and the next fill need not
// start with it.
func (st *cardState) action() { st.pendingCVV = "" }
