package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// slowEvents holds every event until released: a proxyd slow to record
// what was filled.
type slowEvents struct {
	*standInControl
	release chan struct{}
}

func (c *slowEvents) Event(ctx context.Context, id string, ev control.EventRequest) error {
	<-c.release
	return c.standInControl.Event(ctx, id, ev)
}

// TestFillEventDoesNotHoldTheFill: a fill answers without waiting for its
// event to reach proxyd, and the run report, asked right after, still
// counts the fill (it waits for the events on their way).
func TestFillEventDoesNotHoldTheFill(t *testing.T) {
	ctl := &slowEvents{standInControl: &standInControl{}, release: make(chan struct{})}
	h := newControlHarness(t, ctl, ctl.standInControl)
	released := false
	t.Cleanup(func() { // before the harness's: a held event must not hold the close
		if !released {
			close(ctl.release)
		}
	})
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	// The event is still held while the fill answers (a fill that waited
	// for it would never answer: the bound only keeps the test from
	// hanging).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fill_checkout", Arguments: map[string]any{
		"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}}})
	if err != nil {
		t.Fatalf("the fill did not answer while its event was held: %v", err)
	}
	if got := text(r); !strings.HasPrefix(got, "status=ok filled=1/1") {
		t.Fatalf("fill: %q", got)
	}
	done := make(chan string, 1)
	go func() {
		txt, _ := h.call("get_run_report", nil)
		done <- txt
	}()
	close(ctl.release)
	released = true
	rep := jsonOf(t, <-done)
	if fmt.Sprint(rep["filledFieldKinds"]) != "[identity]" {
		t.Fatalf("report %v", rep)
	}
}
