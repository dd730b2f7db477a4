package hosted

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestP20_ReplayKeepsLatest200: the latest 200 answers per connection, a
// session-starting call counting twice, each for 2 minutes.
func TestP20_ReplayKeepsLatest200(t *testing.T) {
	var rc replayCache
	now := time.Unix(1_700_000_000, 0)
	res := func(i int) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(i)}}}
	}
	rc.put("start", res(0), 2, now)
	for i := 1; i <= 198; i++ {
		rc.put(fmt.Sprint(i), res(i), 1, now)
	}
	if rc.get("start", now) == nil || rc.len() != 200 {
		t.Fatalf("200 kept: weight %d", rc.len())
	}
	rc.put("199", res(199), 1, now)
	if rc.get("start", now) != nil || rc.get("1", now) == nil {
		t.Fatal("past 200 the oldest is not dropped first")
	}
	if rc.get("199", now.Add(replayKeep)) != nil {
		t.Fatal("an answer outlived 2 minutes")
	}
}

// TestP20_LoginWriteOutcomeUnknown: a login write past its limit says
// write_outcome_unknown and never to retry it blind; other tools say
// hard_timeout. (How the tool server words the answer is mcpserver's
// statusError; its hosted tests read the whole answer.)
func TestP20_LoginWriteOutcomeUnknown(t *testing.T) {
	err := hardTimeout("create_login", 4*time.Minute)
	if agentvault.ErrorCode(err) != agentvault.CodeWriteOutcomeUnknown || !strings.Contains(agentvault.ErrorMessage(err), "never retry it blind") {
		t.Fatalf("login write: %v", err)
	}
	err = hardTimeout("click", 4*time.Minute)
	if agentvault.ErrorCode(err) != agentvault.CodeHardTimeout ||
		!strings.Contains(agentvault.ErrorMessage(err), "click did not finish within 4 minutes. Its outcome is unknown: check before repeating it.") {
		t.Fatalf("click: %v", err)
	}
	if msg := agentvault.ErrorMessage(hardTimeout("click", time.Minute)); !strings.Contains(msg, "within 1 minute.") {
		t.Fatalf("one minute: %q", msg)
	}
	if !isKept("create_login", nil) || isKept("get_session_outcome", json.RawMessage(`{}`)) || !isKept("get_session_outcome", json.RawMessage(`{"confirmsCheckout":true}`)) {
		t.Fatal("kept tools")
	}
}
