package policy_test

import (
	"testing"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/policy/ledgertest"
)

func TestMemLedgerConformance(t *testing.T) {
	ledgertest.Run(t, func(*testing.T) policy.Ledger { return policy.NewMemLedger() })
}
