package mcpserver

import (
	"testing"

	"github.com/agentvault/agentvault"
)

const (
	num1  = "av_card_1_number_u7x2k"
	cvv1  = "av_card_1_cvv_u7x2k"
	num2  = "av_card_2_number_u7x2k"
	cvv2  = "av_card_2_cvv_u7x2k"
	email = "av_identity_1_email_u7x2k"
)

func classes(t *testing.T, vals ...string) []fieldClass {
	t.Helper()
	out := make([]fieldClass, len(vals))
	for i, v := range vals {
		c, err := classify(v)
		if err != nil {
			t.Fatalf("classify %d: %v", i, err)
		}
		out[i] = c
	}
	return out
}

// TestCardOrderRules is the seed's card-order table: each batch is checked
// before anything is typed, across calls where a batch ended on a number.
func TestCardOrderRules(t *testing.T) {
	type call struct {
		batch []string
		ok    bool
	}
	cases := []struct {
		name  string
		calls []call
	}{
		{"expiry, number, cvv in one batch", []call{{[]string{"12", "2030", num1, cvv1}, true}}},
		{"billing after the cvv is fine", []call{{[]string{num1, cvv1, email}, true}}},
		{"another field straight after the number", []call{{[]string{num1, "12", cvv1}, false}}},
		{"a vault value between number and code", []call{{[]string{num1, email, cvv1}, false}}},
		{"another card's code after the number", []call{{[]string{num1, cvv2}, false}}},
		{"code with no number", []call{{[]string{cvv1}, false}}},
		{"code before the number", []call{{[]string{cvv1, num1}, false}}},
		{"batch ends on the number, next starts with its code", []call{{[]string{"12", num1}, true}, {[]string{cvv1, "x"}, true}}},
		{"batch ends on the number, next starts elsewhere", []call{{[]string{num1}, true}, {[]string{"12", cvv1}, false}}},
		{"batch ends on the number, next starts with another card's code", []call{{[]string{num1}, true}, {[]string{cvv2}, false}}},
		{"two cards in order", []call{{[]string{num1, cvv1, num2, cvv2}, true}}},
		{"literal values only", []call{{[]string{"Jane", "12", "2030"}, true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st cardState
			for i, cl := range c.calls {
				b := classes(t, cl.batch...)
				err := checkCardOrder(&st, b)
				if (err == nil) != cl.ok {
					t.Fatalf("call %d: err=%v, want ok=%v", i+1, err, cl.ok)
				}
				if err != nil {
					if agentvault.ErrorCode(err) != agentvault.CodeFieldOrder {
						t.Fatalf("code %s", agentvault.ErrorCode(err))
					}
					continue
				}
				st.afterBatch(b, len(b))
			}
		})
	}
}

// TestCardOrderActionsAndReads: an action between the number and its code
// spends the pending authorization (the next fill may start elsewhere and
// the code is asked for again); a read leaves it in place.
func TestCardOrderActionsAndReads(t *testing.T) {
	var st cardState
	st.afterBatch(classes(t, num1), 1)
	if st.pendingCVV == "" {
		t.Fatal("no pending code after a batch ending on the number")
	}
	// Reads (count, observe_page, detect_challenge, a wait that timed out)
	// never touch the state: the next batch must still start with the code.
	if err := checkCardOrder(&st, classes(t, "12")); err == nil {
		t.Fatal("batch not starting with the code was accepted")
	}
	st.action() // a click, a press, a wait that returned
	if err := checkCardOrder(&st, classes(t, "12")); err != nil {
		t.Fatalf("after an action: %v", err)
	}
	// The code can still be filled on its own: its number was typed.
	if err := checkCardOrder(&st, classes(t, cvv1)); err != nil {
		t.Fatalf("code after a spent authorization: %v", err)
	}
}

func TestCardOrderPartialBatch(t *testing.T) {
	var st cardState
	b := classes(t, "12", num1, cvv1)
	st.afterBatch(b, 2) // failed on the code
	if st.pendingCVV != "1_u7x2k" {
		t.Fatal("a batch that failed on the code leaves the code owed")
	}
	if err := checkCardOrder(&st, classes(t, "12")); err == nil {
		t.Fatal("the next batch may not skip the owed code")
	}
	st.afterBatch(classes(t, "12", num1, cvv1), 1) // failed on the number
	if st.pendingCVV != "" {
		t.Fatal("no number typed, no code owed")
	}
	if !st.numberFilled["1_u7x2k"] {
		t.Fatal("number typed but not remembered")
	}
}

func TestClassifyRefusesMalformedTokens(t *testing.T) {
	if _, err := classify("av_card_1_number"); agentvault.ErrorCode(err) != agentvault.CodeUnknownToken {
		t.Fatalf("malformed token: %v", err)
	}
	if c, err := classify("Jane Doe"); err != nil || c.isToken {
		t.Fatalf("literal: %+v %v", c, err)
	}
}

// TestP18_SpentCVVMarkedForTheOwner (seed 004): a security code that
// follows its number in the batch, or starts the batch the number ended,
// is authorized by that number; after an action, or filled again later,
// it is marked spent, so proxyd asks the owner to approve the purchase a
// second time.
func TestP18_SpentCVVMarkedForTheOwner(t *testing.T) {
	spent := func(st *cardState, b []fieldClass) []bool {
		markSpentCVV(st, b)
		var out []bool
		for _, f := range b {
			if f.isCVV() {
				out = append(out, f.cvvSpent)
			}
		}
		return out
	}
	var st cardState
	b := classes(t, "12", num1, cvv1)
	if got := spent(&st, b); len(got) != 1 || got[0] {
		t.Fatalf("code right after its number: spent=%v", got)
	}
	st.afterBatch(b, len(b))
	// Filled again later (the number typed earlier): spent.
	if got := spent(&st, classes(t, cvv1)); len(got) != 1 || !got[0] {
		t.Fatalf("code filled again: spent=%v", got)
	}
	// A batch ending on the number, the next starting with its code: not spent.
	st.afterBatch(classes(t, num1), 1)
	if got := spent(&st, classes(t, cvv1, "x")); got[0] {
		t.Fatal("the owed code was marked spent")
	}
	// The same, with an action in between: spent.
	st.action()
	if got := spent(&st, classes(t, cvv1)); !got[0] {
		t.Fatal("the code after an action was not marked spent")
	}
}
