package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionArgument: a handle that names no live session is refused
// before anything runs; without a handle and before open_page, page tools
// ask for open_page and the report tools say there is nothing to report.
func TestSessionArgument(t *testing.T) {
	srv, err := New(Config{Control: &standInControl{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (string, bool) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return text(r), r.IsError
	}
	for name, args := range map[string]map[string]any{
		"click":          {"selector": "#x"},
		"observe_page":   {},
		"get_run_report": {},
		"close_session":  {},
		"fill_checkout":  {"fields": []map[string]any{{"selector": "#a", "value": "b"}}},
	} {
		args["session"] = "s_gone"
		txt, isErr := call(name, args)
		if !isErr || !strings.HasPrefix(txt, "status=error code=session_ended") {
			t.Errorf("%s with an unknown session: %q", name, txt)
		}
	}
	if txt, isErr := call("observe_page", nil); !isErr || !strings.HasPrefix(txt, "status=error code=no_page\n") {
		t.Errorf("observe_page before open_page: %q", txt)
	}
	if txt, isErr := call("close_session", nil); isErr || !strings.HasPrefix(txt, `{"_status":"ok","status":"No session was open"`) {
		t.Errorf("close_session with nothing open: %q", txt)
	}
	if txt, isErr := call("get_run_report", nil); !isErr || !strings.Contains(txt, "no session") {
		t.Errorf("get_run_report with nothing open: %q", txt)
	}
}
