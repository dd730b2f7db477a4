package dashboard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentvault/agentvault/owner"
)

// BenchmarkApprovalsPage is one signed-in GET / with 10 pending approvals
// over the real TLS server (session lookup, sweep, lists, vault list,
// template).
func BenchmarkApprovalsPage(b *testing.B) {
	e := newEnv(b)
	for i := range 10 {
		e.svc.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: fmt.Sprintf("s%d.example", i)})
	}
	e.signIn(ownerPW)
	for b.Loop() {
		if code, _ := e.get("/"); code != 200 {
			b.Fatal(code)
		}
	}
}
