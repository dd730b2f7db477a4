package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStatusLine bounds the machine-readable first line of a prose answer.
const maxStatusLine = 120

// status is the machine-readable summary every answer starts with: the
// first line of a prose answer, the first keys of a JSON one.
type status struct {
	State   string // ok, error, pending
	Code    agentvault.Code
	Filled  *[2]int // filled, of: fill tools only
	Session string  // hosted server: the handle the answer names
	// SessionEnded is set on the hosted server when the session this call
	// used has ended.
	SessionEnded bool
	// Pending holds a pending answer's fields (owner_pending.go).
	Pending *pendingFields
}

func okStatus() status { return status{State: "ok"} }

// pairs returns the status as ordered key/value pairs.
func (s status) pairs() [][2]string {
	st := s.State
	if st == "" {
		st = "ok"
	}
	p := [][2]string{{"status", st}}
	if s.Code != "" {
		p = append(p, [2]string{"code", string(s.Code)})
		if c := codeCategory(s.Code); c != "" {
			p = append(p, [2]string{"category", c})
		}
	}
	if s.Filled != nil {
		p = append(p, [2]string{"filled", fmt.Sprintf("%d/%d", s.Filled[0], s.Filled[1])})
	}
	if s.Pending != nil {
		p = append(p, s.Pending.pairs()...)
	}
	if s.Session != "" {
		p = append(p, [2]string{"session", s.Session})
	}
	if s.SessionEnded {
		p = append(p, [2]string{"session_ended", "true"})
	}
	return p
}

// line renders "status=ok filled=3/3", cut to 120 characters on a pair
// boundary so that a parser never sees half a value.
func (s status) line() string {
	var b strings.Builder
	for i, kv := range s.pairs() {
		part := kv[0] + "=" + sanitizeValue(kv[1])
		if i > 0 {
			if b.Len()+1+len(part) > maxStatusLine {
				break
			}
			b.WriteByte(' ')
		}
		b.WriteString(part)
	}
	out := b.String()
	if len(out) > maxStatusLine {
		out = out[:maxStatusLine]
	}
	return out
}

// sanitizeValue keeps a status value to one token: no spaces, no newlines.
func sanitizeValue(v string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == '=' || r > '~' {
			return '_'
		}
		return r
	}, v)
}

// prose builds a prose answer: the status line, a newline, the text.
func prose(s status, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: s.line() + "\n" + text}},
		IsError: s.State == "error",
	}
}

// jsonAnswer builds a JSON answer whose first keys are the status fields. A
// key the object already has keeps its value, and the status field goes in
// with a leading underscore instead (close_session's own "status").
func jsonAnswer(s status, obj any) (*mcp.CallToolResult, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "encode answer")
	}
	text, err := withStatusKeys(s, raw)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
}

// withStatusKeys splices the status fields in front of a JSON object's own
// keys, keeping the object's bytes (and so its key order) as they are.
func withStatusKeys(s status, raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	var keys map[string]json.RawMessage
	if len(raw) < 2 || raw[0] != '{' || json.Unmarshal(raw, &keys) != nil {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "answer is not a JSON object")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	writeStatusKeys(&b, keys, s.pairs(), false)
	body := bytes.TrimSpace(raw[1:])
	if len(body) > 0 && body[0] == '}' {
		// Empty object: drop the trailing comma.
		b.Truncate(b.Len() - 1)
	}
	b.Write(body)
	return b.Bytes(), nil
}

// codeOf reads an answer's code back from its status line (statusError's
// prose), "" when it names none.
func codeOf(r *mcp.CallToolResult) agentvault.Code {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok || !strings.HasPrefix(tc.Text, "status=") {
		return ""
	}
	line, _, _ := strings.Cut(tc.Text, "\n")
	for _, kv := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(kv, "code="); ok {
			return agentvault.Code(v)
		}
	}
	return ""
}

// statusError is the one place an error becomes an MCP answer: an isError
// result whose text is the status line (status=error code=...), a newline,
// and the error's public message. A non-*agentvault.Error is internal: its
// text is not shown, only "internal error".
func statusError(err error, filled *[2]int) *mcp.CallToolResult {
	code := agentvault.ErrorCode(err)
	msg := agentvault.ErrorMessage(err)
	// A message that already says what to do next (mcpd's own refusals
	// often do) does not get the same hint a second time, nor the code's
	// hint when it names a remedy of its own (ownRemedy).
	var own ownRemedy
	if hint := codeHint(code); hint != "" && !errors.As(err, &own) && !strings.Contains(strings.ToLower(msg), strings.ToLower(strings.TrimSuffix(hint, "."))) {
		msg += " " + hint
	}
	// A refusal the proxy gave a Retry-After (rate_limited) says how long
	// to wait (seed 004: get_token_catalog, "wait for Retry-After").
	var ra interface{ RetryAfterDuration() time.Duration }
	if errors.As(err, &ra) && ra.RetryAfterDuration() > 0 {
		msg += fmt.Sprintf(" Retry-After: %d s. Wait that long, then call again.", int((ra.RetryAfterDuration()+time.Second-1)/time.Second))
	}
	return prose(status{State: "error", Code: code, Filled: filled}, msg)
}

// ownRemedy marks a refusal whose message names its own remedy, unlike
// the usual one of its code: statusError adds no code hint to it.
type ownRemedy struct{ error }

func (e ownRemedy) Unwrap() error { return e.error }

// codeHint adds what the agent should do next for codes whose remedy is
// always the same. It never repeats input.
func codeHint(c agentvault.Code) string {
	switch c {
	case agentvault.CodeNoPage:
		return "Call open_page first."
	case agentvault.CodeSensitiveDataBlocked:
		return "A token was filled in this session: use observe_page and count instead."
	case agentvault.CodeClipboardBlocked:
		return "Click, or press a plain key, instead."
	case agentvault.CodeSessionEnded:
		return "Call open_page without `session` to start a new one."
	case agentvault.CodeInvalidRecipe:
		return "Fix what the message names before submitting again: the same recipe is refused again."
	case agentvault.CodeClientSideEncryption:
		return "Choose another payment method the page offers, or tell the owner this purchase must be completed by hand."
	case agentvault.CodeEgressLost:
		return "Read get_run_report, call close_session, then call open_page without `session` to start a new one."
	}
	return ""
}

// codeCategory is the category a client reads to decide on retries:
// browser_login's not-concluded codes are unprocessable on purpose, so
// nothing resubmits a password on its own (seed 000).
func codeCategory(c agentvault.Code) string {
	switch c {
	case agentvault.CodeBrowserCaptchaPending, agentvault.CodeBrowserLoginTimeout:
		return "unprocessable"
	}
	return ""
}

// addStatus adds pairs to the status res starts with: after a prose
// answer's status line fields (a key the line names already, or one that
// would take the line past maxStatusLine, is left out), or after a JSON
// answer's leading status keys (insertStatusKeys). The hosted server adds
// session= and session_ended= this way.
func addStatus(res *mcp.CallToolResult, pairs [][2]string) {
	if res == nil || len(res.Content) == 0 || len(pairs) == 0 {
		return
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return
	}
	switch {
	case strings.HasPrefix(tc.Text, "{"):
		tc.Text = insertStatusKeys(tc.Text, pairs)
	case strings.HasPrefix(tc.Text, "status="):
		line, rest, _ := strings.Cut(tc.Text, "\n")
		for _, kv := range pairs {
			part := kv[0] + "=" + sanitizeValue(kv[1])
			if strings.Contains(" "+line+" ", " "+kv[0]+"=") || len(line)+1+len(part) > maxStatusLine {
				continue
			}
			line += " " + part
		}
		tc.Text = line + "\n" + rest
	}
}

// writeStatusKeys writes pairs as JSON members, each followed by a comma.
// A key the object already has (taken) gets leading underscores until it is
// free, so the object's own key keeps its value. Values are strings;
// with trueLiteral a "true" is written as the JSON literal (session_ended).
func writeStatusKeys(b *bytes.Buffer, taken map[string]json.RawMessage, pairs [][2]string, trueLiteral bool) {
	for _, kv := range pairs {
		k := kv[0]
		for {
			if _, ok := taken[k]; !ok {
				break
			}
			k = "_" + k
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(kv[1])
		if trueLiteral && kv[1] == "true" {
			vb = []byte("true")
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		b.WriteByte(',')
	}
}

// insertStatusKeys puts extra after a JSON answer's leading status keys
// (status, code, filled, with or without leading underscores). A key the
// object already has gets a leading underscore.
func insertStatusKeys(text string, extra [][2]string) string {
	var keys map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &keys) != nil {
		return text
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if _, err := dec.Token(); err != nil {
		return text
	}
	off := int(dec.InputOffset())
	// The status fields come first, in this order, each once; the
	// object's own keys follow (close_session's own "status").
	order := []string{"status", "code", "filled"}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return text
		}
		k, _ := tok.(string)
		for len(order) > 0 && order[0] != strings.TrimLeft(k, "_") {
			order = order[1:]
		}
		if len(order) == 0 {
			goto insert
		}
		order = order[1:]
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return text
		}
		off = int(dec.InputOffset())
	}
insert:
	var b bytes.Buffer
	writeStatusKeys(&b, keys, extra, true)
	ins := b.String()
	head := text[:off]
	if strings.TrimSpace(head) == "{" {
		// No status keys: the new keys go first.
		rest := strings.TrimLeft(text[off:], " \n\t")
		if strings.HasPrefix(rest, "}") {
			ins = strings.TrimSuffix(ins, ",")
		}
		return head + ins + text[off:]
	}
	return head + "," + strings.TrimSuffix(ins, ",") + text[off:]
}
