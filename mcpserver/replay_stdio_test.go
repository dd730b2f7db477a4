package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioPeer speaks newline-delimited JSON-RPC to a Server over a pair of
// pipes, the way a host drives mcpd on stdin/stdout, so a test can send
// the same id twice (the SDK's client never does).
type stdioPeer struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

func (p *stdioPeer) send(msg map[string]any) {
	p.t.Helper()
	msg["jsonrpc"] = "2.0"
	b, _ := json.Marshal(msg)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

// answer reads messages until the response to id, returning its first text.
func (p *stdioPeer) answer(id int) string {
	p.t.Helper()
	for p.out.Scan() {
		var m struct {
			ID     *int `json:"id"`
			Result *struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(p.out.Bytes(), &m) != nil || m.ID == nil || *m.ID != id {
			continue
		}
		if m.Error != nil {
			p.t.Fatalf("id %d: protocol error %s", id, m.Error.Message)
		}
		if m.Result == nil || len(m.Result.Content) == 0 {
			return ""
		}
		return m.Result.Content[0].Text
	}
	p.t.Fatalf("no answer to id %d: %v", id, p.out.Err())
	return ""
}

func (p *stdioPeer) call(id int, tool string, args map[string]any) string {
	p.t.Helper()
	p.send(map[string]any{"id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	return p.answer(id)
}

// TestP20_StdioRetransmissionNeverRunsTwice: over stdio too, a call that
// changes something sent again with the same JSON-RPC id gets the first
// answer and does not run; a new id runs it again; a call that changes
// nothing runs each time; one that failed inside the tool is not kept.
func TestP20_StdioRetransmissionNeverRunsTwice(t *testing.T) {
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	ctl := &standInControl{}
	srv, err := New(Config{
		Control: ctl, APIKey: "avk_test", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: []string{site.SPKI}, UnsafeDirectBrowser: true, WaitPoll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close(); <-done; srv.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	p := &stdioPeer{t: t, in: inW, out: sc}

	p.send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "host", "version": "0"}}})
	p.answer(1)
	p.send(map[string]any{"method": "notifications/initialized", "params": map[string]any{}})

	if txt := p.call(2, "open_page", map[string]any{"url": site.CheckoutURL()}); !strings.HasPrefix(txt, "status=ok") {
		t.Fatalf("open_page: %q", txt)
	}
	auths := func() int { ctl.mu.Lock(); defer ctl.mu.Unlock(); return len(ctl.auths) }
	fill := map[string]any{"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}}
	n0 := auths()
	a1 := p.call(3, "fill_checkout", fill)
	a2 := p.call(3, "fill_checkout", fill)
	if a1 != a2 || auths() != n0+1 || !strings.HasPrefix(a1, "status=ok filled=1/1") {
		t.Fatalf("retransmitted fill ran %d times; %q vs %q", auths()-n0, a1, a2)
	}
	// The same arguments under another id are another call.
	if txt := p.call(4, "fill_checkout", fill); !strings.HasPrefix(txt, "status=ok") || auths() != n0+2 {
		t.Fatalf("a new id did not run the fill again (%d): %q", auths()-n0, txt)
	}
	// Other arguments under a used id are another call too.
	other := map[string]any{"fields": []map[string]any{{"selector": "#notes", "value": "av_identity_1_email_u7x2k"}}}
	if txt := p.call(3, "fill_checkout", other); !strings.HasPrefix(txt, "status=ok") || auths() != n0+3 {
		t.Fatalf("other arguments under id 3 were replayed (%d): %q", auths()-n0, txt)
	}
	// A call that failed inside the tool is not kept: sent again, it runs.
	unknown := map[string]any{"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_phone_u7x2k"}}}
	f1 := p.call(5, "fill_checkout", unknown)
	f2 := p.call(5, "fill_checkout", unknown)
	if !strings.HasPrefix(f1, "status=error code=unknown_token") || !strings.HasPrefix(f2, "status=error code=unknown_token") || auths() != n0+5 {
		t.Fatalf("a failed fill sent again reached authorize %d times in all: %q / %q", auths()-n0-3, f1, f2)
	}
}
