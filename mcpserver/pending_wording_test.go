package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSeed004_PendingAnswerWording: a pending answer says, before any owner
// wait is reported, that no request to the owner has been reported (and
// names no reason); while one is reported, what the owner is asked; once it
// ended while the call runs on, that the call stopped waiting on the owner
// and its answer will say what came of it. waiting_on_owner is true only
// in the middle case. (mcpserver/hosted's
// TestSeed004_PendingSaysWhetherAnOwnerWaitIsReported holds when each is
// given.)
func TestSeed004_PendingAnswerWording(t *testing.T) {
	wait := &control.Pending{Pending: true, WaitID: "wt_1", Kind: "new_destination", Site: "shop.example"}
	for _, c := range []struct {
		name      string
		p         hosted.Pending
		line      string
		says, not string
	}{
		{"before any wait", hosted.Pending{Tool: "fill_checkout", Wait: "w_x"}, "status=pending wait=w_x waiting_on_owner=false\n",
			"No request to the account owner has been reported for this call", "reason"},
		{"while it waits", hosted.Pending{Tool: "fill_checkout", Wait: "w_x", Owner: wait}, "status=pending wait=w_x waiting_on_owner=true reason=new_destination\n",
			"fill_checkout is waiting for the account owner to approve a new site (shop.example)", "No request"},
		{"after the wait ended", hosted.Pending{Tool: "fill_checkout", Wait: "w_x", Owner: wait, OwnerDone: true}, "status=pending wait=w_x waiting_on_owner=false\n",
			"fill_checkout stopped waiting on the account owner and is still running; its answer will say what came of the request.", "reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := pendingAnswer(c.p)
			txt := r.Content[0].(*mcp.TextContent).Text
			sc, _ := json.Marshal(r.StructuredContent)
			if !strings.HasPrefix(txt, c.line) || !strings.Contains(txt, c.says) || strings.Contains(txt, c.not) || strings.Contains(string(sc), c.not) {
				t.Fatalf("%q (structuredContent %s)", txt, sc)
			}
		})
	}
}
