package redact

import (
	"strings"

	"github.com/agentvault/agentvault"
)

// CheckChordAfterFill refuses, with clipboard_blocked, a Playwright key
// press that copies, cuts or pastes (seed 004, press): Control or Meta (in
// any spelling: Ctrl, Cmd, Command, ControlOrMeta, ...) with C, X, V or
// Insert, whatever other modifiers ride along; Shift+Insert (paste) and
// Shift+Delete (cut); and the Copy, Cut and Paste keys themselves. Key
// names are matched case-insensitively and as codes too ("KeyC").
func CheckChordAfterFill(key string) error {
	k := strings.TrimSpace(key)
	if k == "" {
		return agentvault.Errorf(agentvault.CodeInvalidParams, "empty key")
	}
	parts := splitChord(strings.ToLower(k))
	main := parts[len(parts)-1]
	var ctrl, shift bool
	for _, m := range parts[:len(parts)-1] {
		switch m {
		case "control", "ctrl", "meta", "cmd", "command", "controlormeta", "os", "super", "win", "windows",
			"controlleft", "controlright", "metaleft", "metaright":
			ctrl = true
		case "shift", "shiftleft", "shiftright":
			shift = true
		}
	}
	main = strings.TrimPrefix(main, "key")
	if main == "" { // the key was literally "Key"
		main = "key"
	}
	blocked := false
	switch main {
	case "copy", "cut", "paste":
		blocked = true
	case "c", "x", "v", "insert":
		blocked = ctrl
	}
	if shift && (main == "insert" || main == "delete") {
		blocked = true
	}
	if blocked {
		return agentvault.Errorf(agentvault.CodeClipboardBlocked,
			"copy, cut and paste key presses are refused once a value has been filled; click, or press a plain key")
	}
	return nil
}

// splitChord splits "Control+Shift+V" on '+', keeping a literal '+' key
// ("Control++" is Control with the plus key).
func splitChord(k string) []string {
	var parts []string
	for len(k) > 0 {
		i := strings.IndexByte(k, '+')
		if i < 0 {
			parts = append(parts, k)
			break
		}
		if i == 0 { // a '+' key
			parts = append(parts, "+")
			k = strings.TrimPrefix(k[1:], "+")
			continue
		}
		parts = append(parts, k[:i])
		k = k[i+1:]
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if len(parts) == 0 {
		parts = []string{""}
	}
	return parts
}
