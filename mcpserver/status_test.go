package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func text(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if t, ok := r.Content[0].(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}

func TestStatusLine(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct {
		name string
		s    status
		want string
	}{
		{"ok", okStatus(), "status=ok"},
		{"filled", status{State: "ok", Filled: &[2]int{3, 3}}, "status=ok filled=3/3"},
		{"error with code and filled", status{State: "error", Code: agentvault.CodeLimitReached, Filled: &[2]int{0, 1}}, "status=error code=limit_reached filled=0/1"},
		{"session", status{State: "ok", Session: "s_8f3k"}, "status=ok session=s_8f3k"},
		{"spaces in a value cannot split a pair", status{State: "error", Code: "bad code"}, "status=error code=bad_code"},
		{"too long drops whole pairs", status{State: "ok", Session: long}, "status=ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.s.line()
			if got != c.want {
				t.Fatalf("line = %q, want %q", got, c.want)
			}
			if len(got) > maxStatusLine {
				t.Fatalf("line is %d chars", len(got))
			}
		})
	}
}

func TestProseStartsWithStatusLine(t *testing.T) {
	r := prose(status{State: "ok", Filled: &[2]int{2, 4}}, "Filled 2 fields")
	if got := text(r); got != "status=ok filled=2/4\nFilled 2 fields" || r.IsError {
		t.Fatalf("prose = %q (isError %v)", got, r.IsError)
	}
}

func TestJSONStatusKeys(t *testing.T) {
	cases := []struct {
		name string
		obj  string
		want string
	}{
		{"plain", `{"count":2,"visible":1}`, `{"status":"ok","count":2,"visible":1}`},
		{"own status key keeps its value", `{"status":"Session closed","report":{}}`, `{"_status":"ok","status":"Session closed","report":{}}`},
		{"empty object", `{}`, `{"status":"ok"}`},
		{"indented stays indented", "{\n  \"a\": 1\n}", "{\"status\":\"ok\",\"a\": 1\n}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := withStatusKeys(okStatus(), []byte(c.obj))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
		})
	}
	if _, err := withStatusKeys(okStatus(), []byte(`[1,2]`)); err == nil {
		t.Fatal("an array was accepted")
	}
}

// TestStatusErrorMapping: every error becomes an isError result whose first
// line carries its code; an error that is not an *agentvault.Error shows no
// text at all.
func TestStatusErrorMapping(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		filled   *[2]int
		wantLine string
		wantText string
	}{
		{"coded", agentvault.Errorf(agentvault.CodeFieldOrder, "reorder"), nil, "status=error code=card_field_order", "reorder"},
		{"with filled", agentvault.Errorf(agentvault.CodeFieldNotFound, "gone"), &[2]int{1, 3}, "status=error code=field_not_found filled=1/3", "gone"},
		{"hint", agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "no"), nil, "status=error code=sensitive_data_blocked", "observe_page"},
		{"wrapped keeps code", agentvault.Wrap(agentvault.CodeTimeout, errors.New("cause 4111111111111111"), "slow"), nil, "status=error code=timeout", "slow"},
		{"foreign error hidden", errors.New("boom 4111111111111111"), nil, "status=error code=internal", "internal error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := statusError(c.err, c.filled)
			if !r.IsError {
				t.Fatal("not isError")
			}
			got := text(r)
			line, rest, _ := strings.Cut(got, "\n")
			if line != c.wantLine || !strings.Contains(rest, c.wantText) {
				t.Fatalf("got %q", got)
			}
			if strings.Contains(got, "4111") {
				t.Fatal("cause text leaked into the result")
			}
		})
	}
}

func TestPageLines(t *testing.T) {
	lines := []string{"aaaa", "bbbb", "cccc", "dddd"}
	got, next := snapshotText(lines, nil, 0, 9)
	if got != "aaaa\nbbbb" || next != 2 {
		t.Fatalf("page 1: %q %d", got, next)
	}
	got, next = snapshotText(lines, nil, next, 9)
	if got != "cccc\ndddd" || next != 0 {
		t.Fatalf("page 2: %q %d", got, next)
	}
	// A line longer than a page is cut, and paging still advances.
	got, next = snapshotText([]string{strings.Repeat("z", 30), "y"}, nil, 0, 10)
	if got != strings.Repeat("z", 10) || next != 1 {
		t.Fatalf("long line: %q %d", got, next)
	}
}
