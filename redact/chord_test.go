package redact

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
)

func TestP19_CheckChordAfterFill(t *testing.T) {
	blocked := []string{
		"Control+c", "Control+C", "Control+x", "Control+v", "Control+V",
		"Meta+c", "Meta+x", "Meta+v", "Meta+V",
		"ctrl+c", "Cmd+v", "Command+X", "ControlOrMeta+v", "ControlOrMeta+C",
		"Control+Shift+v", "Shift+Control+V", "Alt+Control+c", "Control+Alt+Shift+x",
		"Control+KeyC", "Meta+KeyV", "Control + v",
		"Control+Insert", "Shift+Insert", "Shift+Delete", "Meta+Insert",
		"Copy", "Cut", "Paste", "paste",
	}
	for _, k := range blocked {
		if err := CheckChordAfterFill(k); agentvault.ErrorCode(err) != agentvault.CodeClipboardBlocked {
			t.Errorf("%q: %v, want clipboard_blocked", k, err)
		}
	}
	allowed := []string{"Enter", "Tab", "Escape", "ArrowDown", "c", "v", "Shift+V", "Alt+c", "Control+a",
		"Control+z", "Delete", "Insert", "Backspace", "Space", "+", "Control++", "Shift+Tab", "KeyV", "Key"}
	for _, k := range allowed {
		if err := CheckChordAfterFill(k); err != nil {
			t.Errorf("%q refused: %v", k, err)
		}
	}
	if err := CheckChordAfterFill(" "); agentvault.ErrorCode(err) != agentvault.CodeInvalidParams {
		t.Errorf("empty key: %v", err)
	}
}

func FuzzCheckChord(f *testing.F) {
	f.Add("Control+v")
	f.Add("Shift++")
	f.Fuzz(func(t *testing.T, k string) {
		err := CheckChordAfterFill(k)
		l := strings.ToLower(strings.ReplaceAll(k, " ", ""))
		if (l == "control+v" || l == "meta+v" || l == "control+c" || l == "meta+c") && err == nil {
			t.Fatal("allowed a clipboard chord")
		}
	})
}

func TestP19_SnapshotGate(t *testing.T) {
	var g SnapshotGate
	for _, tool := range []string{ToolSnapshotPage, ToolListFrames, "count"} {
		if err := g.Check(tool); err != nil {
			t.Fatalf("before a fill, %s refused: %v", tool, err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); g.MarkFilled(); _ = g.Check(ToolSnapshotPage) }()
	}
	wg.Wait()
	if !g.Filled() {
		t.Fatal("gate not closed")
	}
	for _, tool := range []string{ToolSnapshotPage, ToolListFrames} {
		if err := g.Check(tool); agentvault.ErrorCode(err) != agentvault.CodeSensitiveDataBlocked {
			t.Fatalf("after a fill, %s: %v", tool, err)
		}
	}
	for _, tool := range []string{"count", "observe_page", "click"} {
		if err := g.Check(tool); err != nil {
			t.Fatalf("after a fill, %s refused: %v", tool, err)
		}
	}
}

func TestP19_MaskSelectors(t *testing.T) {
	sels := MaskSelectors()
	joined := strings.Join(sels, "\n")
	for _, must := range []string{`type="password"`, "cc-number", "cc-csc", "cc-exp", "one-time-code",
		"cvc", "cvv", `"pan"`, "card", "stripe.com", "iframe"} {
		if !strings.Contains(joined, must) {
			t.Errorf("no mask selector covers %q", must)
		}
	}
	for _, s := range sels {
		// Every mask must be plain CSS, as Playwright's screenshot masks are
		// located with it in every frame.
		if err := ValidateHintSelector(s, false); err != nil {
			t.Errorf("mask %q is not plain CSS: %v", s, err)
		}
	}
	if got := strings.Count(MaskSelectorList(), ", "); got != len(sels)-1 {
		t.Fatalf("MaskSelectorList joins %d selectors, want %d", got+1, len(sels))
	}
	sels[0] = "mutated"
	if MaskSelectors()[0] == "mutated" {
		t.Fatal("MaskSelectors returned the shared slice")
	}
}
