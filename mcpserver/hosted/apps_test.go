package hosted

import (
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// choiceKeys plays proxyd's key check with the holder's Connected apps
// choice per key: nil is no choice yet.
type choiceKeys map[string][]string

const (
	keyUnchosen = "avk_none_secret"
	keyNothing  = "avk_zero_secret"
	keyLogins   = "avk_logn_secret"
	keyAll      = "avk_full_secret"
)

func (k choiceKeys) AuthenticateKey(ctx context.Context, key string) (control.KeyInfo, error) {
	uses, ok := k[key]
	if !ok {
		return control.KeyInfo{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(key, "avk_"), "_")
	return control.KeyInfo{ID: "avk_" + id, Name: id, AppChosen: uses != nil, AppUses: uses}, nil
}

// TestSeed004_HostedToolsNeedTheConnectedAppsChoice: on the hosted server a
// connection whose holder has not chosen on Connected apps what it may use
// gets only get_checkout_recipes; every other tool is refused before it
// runs, naming the page, with no session started and nothing kept for
// replay. After a choice, the tools of the chosen uses run and the others
// are refused naming the use; a choice of nothing is still only recipes.
func TestSeed004_HostedToolsNeedTheConnectedAppsChoice(t *testing.T) {
	h := newFakeHarnessKeys(t, choiceKeys{keyUnchosen: nil, keyNothing: {}, keyLogins: {control.AppUseLogins}, keyAll: control.AppUses})
	if txt := h.call(t, keyUnchosen, 1, "get_checkout_recipes", nil, ""); !strings.Contains(txt, "get_checkout_recipes run 1") {
		t.Fatalf("recipes before a choice: %q", txt)
	}
	for i, tool := range []string{"open_page", "click", "fill_checkout", "create_login"} {
		txt := h.call(t, keyUnchosen, 10+i, tool, nil, "idem-unchosen-0123456789")
		if !strings.HasPrefix(txt, "status=error code=forbidden\n") || !strings.Contains(txt, "Connected apps") ||
			!strings.Contains(txt, "only get_checkout_recipes works") || strings.Contains(txt, "session:") {
			t.Fatalf("%s before a choice: %q", tool, txt)
		}
	}
	// The same call again is decided again: the refusal was not kept.
	if txt := h.call(t, keyUnchosen, 10, "open_page", nil, "idem-unchosen-0123456789"); !strings.Contains(txt, "code=forbidden") {
		t.Fatalf("open_page sent again: %q", txt)
	}
	if n := len(h.tools.opened); n != 0 || h.tools.count("open_page")+h.tools.count("click")+h.tools.count("fill_checkout")+h.tools.count("create_login") != 0 {
		t.Fatalf("refused tools ran: %d sessions opened, runs %v", n, h.tools.runs)
	}
	if txt := h.call(t, keyNothing, 20, "open_page", nil, ""); !strings.Contains(txt, "code=forbidden") || !strings.Contains(txt, "anything but get_checkout_recipes") {
		t.Fatalf("open_page after choosing nothing: %q", txt)
	}
	handle := handleIn(t, h.call(t, keyLogins, 30, "open_page", nil, ""))
	if txt := h.call(t, keyLogins, 31, "create_login", map[string]any{"session": handle}, ""); !strings.Contains(txt, "create_login run 1") {
		t.Fatalf("create_login with logins chosen: %q", txt)
	}
	if txt := h.call(t, keyLogins, 32, "fill_checkout", map[string]any{"session": handle}, ""); !strings.Contains(txt, "code=forbidden") ||
		!strings.Contains(txt, "has not let it use checkout") || h.tools.count("fill_checkout") != 0 {
		t.Fatalf("fill_checkout with only logins chosen: %q", txt)
	}
	if txt := h.call(t, keyLogins, 33, "close_session", map[string]any{"session": handle}, ""); !strings.Contains(txt, "session_ended=true") {
		t.Fatalf("close_session: %q", txt)
	}
	handle = handleIn(t, h.call(t, keyAll, 40, "open_page", nil, ""))
	if txt := h.call(t, keyAll, 41, "fill_checkout", map[string]any{"session": handle}, ""); !strings.Contains(txt, "fill_checkout run 1") {
		t.Fatalf("fill_checkout with every use chosen: %q", txt)
	}
}
