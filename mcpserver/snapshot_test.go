package mcpserver

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/e2e/corpus"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newCorpusHarness is newHarness on the page corpus (e2e/corpus) as well as
// the test shop: real Chromium, real MCP transport, the stand-in control.
func newCorpusHarness(t *testing.T) (*harness, *corpus.Corpus) {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	c, err := corpus.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctl := &standInControl{}
	return newControlHarness(t, ctl, ctl, c.SPKI()), c
}

// newControlHarness is newHarness with ctl answering for proxyd (stand
// keeps what it records), trusting the test shop and the extra SPKIs.
func newControlHarness(t *testing.T, ctl Control, stand *standInControl, spki ...string) *harness {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	logs := &syncBuffer{}
	srv, err := New(Config{
		Control: ctl, APIKey: "avk_test", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: append([]string{site.SPKI}, spki...), UnsafeDirectBrowser: true,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		srv.Close()
	})
	return &harness{t: t, site: site, ctl: stand, cs: cs, srv: srv, logs: logs}
}

func corpusURL(t *testing.T, c *corpus.Corpus, name string) (string, corpus.Page) {
	t.Helper()
	for _, p := range corpus.Pages() {
		if p.Name == name {
			return c.URL(p), p
		}
	}
	t.Fatalf("no corpus page %s", name)
	return "", corpus.Page{}
}

var (
	truncNote = regexp.MustCompile(`\n# truncated: call snapshot_page again with cursor=(\d+) depth=(\d+)[^\n]*$`)
	refIn     = regexp.MustCompile(`\[ref=([a-z0-9]+)\]`)
	fieldLine = regexp.MustCompile(`(?m)^ *- (textbox|searchbox|spinbutton|combobox|checkbox|radio|slider|switch|listbox)\b[^\n]*\[ref=([a-z0-9]+)\]`)
	selLine   = regexp.MustCompile(`(?m)^# ([a-z0-9]+): selector=`)
)

// TestSnapshotPagingKeepsFieldRefs: the long listing does not fit one
// answer; paging through it with the cursor and depth the note names shows
// every field's ref exactly once, each page at most 24,000 characters and
// carrying the selector of every field it shows (and no other), and all of
// the listing's fields (search, filters, sort, 84 quantities, newsletter).
func TestSnapshotPagingKeepsFieldRefs(t *testing.T) {
	h, c := newCorpusHarness(t)
	url, _ := corpusURL(t, c, "listing")
	h.ok("open_page", map[string]any{"url": url})
	args := map[string]any{}
	seen := map[string]int{}
	pages := 0
	for {
		txt := h.ok("snapshot_page", args)
		pages++
		if len(txt) > snapshotPageSize {
			t.Fatalf("page %d has %d characters", pages, len(txt))
		}
		yaml, sels, _ := strings.Cut(txt, "\n"+fieldsHeader+"\n")
		shown := map[string]bool{}
		for _, m := range fieldLine.FindAllStringSubmatch(yaml, -1) {
			shown[m[2]] = true
			seen[m[2]]++
		}
		listed := map[string]bool{}
		for _, m := range selLine.FindAllStringSubmatch(sels, -1) {
			listed[m[1]] = true
		}
		for ref := range shown {
			if !listed[ref] {
				t.Fatalf("page %d shows field %s without its selector", pages, ref)
			}
		}
		for ref := range listed {
			if !shown[ref] {
				t.Fatalf("page %d lists the selector of %s, a field it does not show", pages, ref)
			}
		}
		m := truncNote.FindStringSubmatch(txt)
		if m == nil {
			break
		}
		if pages > 20 {
			t.Fatal("paging does not end")
		}
		args = map[string]any{"cursor": atoi(t, m[1]), "depth": atoi(t, m[2])}
	}
	if pages < 2 {
		t.Fatalf("the listing fit one page (%d fields): it is meant to need paging", len(seen))
	}
	for ref, n := range seen {
		if n != 1 {
			t.Fatalf("field %s shown on %d pages", ref, n)
		}
	}
	// 1 search box, 29 filters, the sort select, 84 quantities and the
	// newsletter's email.
	if len(seen) != 116 {
		t.Fatalf("%d field refs over %d pages, want 116", len(seen), pages)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestSnapshotSelectorAndFrame: selector returns that element's part only,
// frame that frame's document only, with field selectors naming the frame;
// both together read the element inside the frame; a truncated part's note
// names them again.
func TestSnapshotSelectorAndFrame(t *testing.T) {
	h, c := newCorpusHarness(t)
	url, p := corpusURL(t, c, "checkout5")
	h.ok("open_page", map[string]any{"url": url})
	whole := h.ok("snapshot_page", nil)
	for _, want := range []string{`textbox "First name"`, `textbox "Card number"`, "Order summary"} {
		if !strings.Contains(whole, want) {
			t.Fatalf("the whole page lacks %q", want)
		}
	}
	form := h.ok("snapshot_page", map[string]any{"selector": "form#shipping"})
	if !strings.Contains(form, `textbox "First name"`) || strings.Contains(form, "Card number") || strings.Contains(form, "Order summary") {
		t.Fatalf("selector part:\n%s", form)
	}
	if !strings.Contains(form, "selector=#first-name\n") && !strings.HasSuffix(form, "selector=#first-name") {
		t.Fatalf("the part's field selectors:\n%s", form)
	}
	fr := h.ok("snapshot_page", map[string]any{"frame": p.Card.Frame})
	if !strings.Contains(fr, `textbox "Card number"`) || strings.Contains(fr, "First name") || strings.Contains(fr, "Order summary") {
		t.Fatalf("frame part:\n%s", fr)
	}
	if !strings.Contains(fr, "selector=#card-number frame="+p.Card.Frame) {
		t.Fatalf("the frame's field selector:\n%s", fr)
	}
	both := h.ok("snapshot_page", map[string]any{"frame": p.Card.Frame, "selector": "#card-number"})
	if n := len(refIn.FindAllString(both, -1)); n != 1 || !strings.Contains(both, `textbox "Card number"`) {
		t.Fatalf("selector inside frame (%d refs):\n%s", n, both)
	}
	h.refused("snapshot_page", map[string]any{"selector": "#nothing-here"}, agentvault.CodeFieldNotFound)
	h.refused("snapshot_page", map[string]any{"selector": "input"}, agentvault.CodeInvalidInput)

	// A part that overflows an answer pages like the whole page, and its
	// note names the part.
	lurl, _ := corpusURL(t, c, "listing")
	h.ok("open_page", map[string]any{"url": lurl})
	part := h.ok("snapshot_page", map[string]any{"selector": "main"})
	m := regexp.MustCompile(`# truncated: call snapshot_page again with cursor=(\d+) depth=30 selector=main for the rest$`).FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("the main part's note: %q", part[max(0, len(part)-200):])
	}
	rest := h.ok("snapshot_page", map[string]any{"selector": "main", "cursor": atoi(t, m[1])})
	if strings.Contains(rest, "Filters") || !strings.Contains(rest, "Add to cart") {
		t.Fatal("the second page of the main part shows something outside it, or nothing")
	}
}

// TestP19_SnapshotPartsAfterFill: once a token was filled, snapshot_page is
// refused whatever part it is asked for (selector, frame, both, a cursor),
// before the page is read.
func TestP19_SnapshotPartsAfterFill(t *testing.T) {
	h, c := newCorpusHarness(t)
	url, p := corpusURL(t, c, "checkout5")
	h.ok("open_page", map[string]any{"url": url})
	h.ok("snapshot_page", map[string]any{"frame": p.Card.Frame})
	h.ok("snapshot_page", map[string]any{"selector": "form#shipping"})
	h.ok("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}})
	for _, args := range []map[string]any{
		{"selector": "form#shipping"},
		{"frame": p.Card.Frame},
		{"frame": p.Card.Frame, "selector": "#card-number"},
		{"selector": "#email"},
		{"cursor": 1, "depth": 30},
		{"selector": "#nothing-here"},
	} {
		txt := h.refused("snapshot_page", args, agentvault.CodeSensitiveDataBlocked)
		if strings.Contains(txt, standIns["email"]) || strings.Contains(txt, "[ref=") {
			t.Fatalf("a refused snapshot carried page data: %q", txt)
		}
	}
}
