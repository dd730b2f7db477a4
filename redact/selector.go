package redact

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
)

const (
	// MaxHintSelectorRunes is the seed's limit for a page hint's selector
	// and frame.
	MaxHintSelectorRunes = 512
	// maxSelectorLen bounds the selectors the after-fill check reads.
	maxSelectorLen = 4096
	// maxNesting bounds recursion into internal:has="..." and friends.
	maxNesting = 4
)

// Why a selector is refused after a fill. The refusal names the rule, never
// the selector: it may hold the digits it was fishing for.
const (
	whyValue   = "tests a field's value"
	whyDigit   = "puts a digit in a text match"
	whyRegex   = "uses a regular expression on text"
	whyXPath   = "reads text through XPath"
	whyEngine  = "uses a selector engine this check does not know"
	whyMalform = "is malformed (unbalanced quotes or brackets)"
	whyNesting = "nests too deeply"
)

// CheckSelectorAfterFill refuses, with sensitive_data_blocked, a selector
// that could read a filled value back through count or wait_for_selector
// (seed 004, count). The rules, applied to the selector as written and with
// its CSS escapes decoded, case-insensitively:
//
//   - Any attribute test on an attribute whose name contains "value"
//     (value, aria-valuetext, aria-valuenow, data-value), in CSS brackets,
//     internal:attr=[...], _react/_vue props, or XPath @value, even
//     presence-only: the page may mirror what was typed into it.
//   - A digit in any text match: :has-text(), :text(), :text-is(),
//     :has-not-text(), :-soup-contains(), :contains(), text=..., a quoted
//     text selector ("..."), internal:text / has-text / label / role / attr
//     engines. Text without digits stays allowed, as the seed says.
//   - Any regular expression on text (text=/.../, :text-matches(), a /.../
//     argument), digits or not: "\d" and "." match digits without naming one.
//   - XPath that reads text (text(), string(), contains(), ...) together with
//     any digit, a string literal holding a digit, or functions that measure
//     or convert text (string-length, translate, number, sum).
//   - In CSS attribute comparisons, a digit in the compared string, unless
//     the attribute is structural (id, name, class, type, for, autocomplete,
//     role, data-testid and similar test ids, form, href, src): labels and
//     titles can echo what the page shows.
//   - Unknown selector engines, unbalanced quotes or brackets, backticks.
//     A leading '*' (Playwright's capture mark) is looked through.
//
// Structural selectors with digits stay allowed: "#card-1", ".step-2",
// "input:nth-child(3)", "[name=cc-exp-1]", "nth=1", "aria-ref=e12". An id or
// a class is the page's markup, not the value typed into it.
func CheckSelectorAfterFill(sel string) error {
	if strings.TrimSpace(sel) == "" {
		return agentvault.Errorf(agentvault.CodeInvalidParams, "empty selector")
	}
	if len(sel) > maxSelectorLen {
		return agentvault.Errorf(agentvault.CodeInvalidParams, "selector longer than %d bytes", maxSelectorLen)
	}
	if why := selectorProbe(sel, 0); why != "" {
		return agentvault.Errorf(agentvault.CodeSensitiveDataBlocked,
			"after a fill, a selector that %s is refused; point at the element by id, class, [name=...] or [type=...], or by text without digits", why)
	}
	return nil
}

func selectorProbe(sel string, depth int) string {
	if depth > maxNesting {
		return whyNesting
	}
	for _, form := range []string{sel, decodeCSSEscapes(sel)} {
		if why := probeForm(strings.ToLower(form), depth); why != "" {
			return why
		}
	}
	return ""
}

func probeForm(s string, depth int) string {
	if strings.ContainsRune(s, '`') {
		// Some Playwright engines quote with backticks; this check does not
		// parse them, so it refuses them rather than mis-split a chain.
		return whyMalform
	}
	segs, ok := splitChain(s)
	if !ok {
		return whyMalform
	}
	for _, seg := range segs {
		// A leading '*' marks the part Playwright returns ("*css=div >> ...");
		// it does not change what the segment matches.
		seg = strings.TrimPrefix(strings.TrimSpace(seg), "*")
		if why := probeSegment(strings.TrimSpace(seg), depth); why != "" {
			return why
		}
	}
	return ""
}

// knownEngines are the Playwright selector engines the check understands;
// the value says how its body is read.
var knownEngines = map[string]string{
	"css": "css", "id": "plain", "data-testid": "plain", "data-test-id": "plain", "data-test": "plain",
	"nth": "plain", "visible": "plain", "aria-ref": "plain", "internal:testid": "css",
	"xpath": "xpath",
	"text":  "text", "internal:text": "text", "internal:has-text": "text", "internal:has-not-text": "text",
	"internal:label": "text", "role": "text", "internal:role": "text", "internal:attr": "text",
	"_react": "css", "_vue": "css", "internal:control": "plain",
	"internal:has": "nested", "internal:has-not": "nested", "internal:and": "nested",
	"internal:or": "nested", "internal:chain": "nested",
}

func probeSegment(seg string, depth int) string {
	if seg == "" {
		return ""
	}
	if why := valueAttribute(seg); why != "" {
		return why
	}
	switch {
	case strings.HasPrefix(seg, "//") || strings.HasPrefix(seg, "..") || strings.HasPrefix(seg, "(//") || strings.HasPrefix(seg, "(."):
		return probeXPath(seg)
	case seg[0] == '"' || seg[0] == '\'':
		return probeText(seg)
	}
	if name, body, ok := enginePrefix(seg); ok {
		kind, known := knownEngines[name]
		if !known {
			return whyEngine
		}
		switch kind {
		case "xpath":
			return probeXPath(body)
		case "text":
			if why := probeText(body); why != "" {
				return why
			}
			return probeCSS(body)
		case "nested":
			inner := strings.TrimSpace(body)
			if u, err := strconv.Unquote(inner); err == nil {
				inner = u
			} else if len(inner) > 0 && (inner[0] == '"' || inner[0] == '\'') {
				return whyMalform
			}
			return selectorProbe(inner, depth+1)
		case "plain":
			return ""
		}
		return probeCSS(body)
	}
	return probeCSS(seg)
}

// enginePrefix splits "name=body" when seg starts with a selector engine
// name. A CSS selector never starts with an identifier followed by '='.
func enginePrefix(seg string) (name, body string, ok bool) {
	i := 0
	for i < len(seg) {
		c := seg[i]
		if c >= 'a' && c <= 'z' || c == '_' || c == ':' || c == '-' || (i > 0 && c >= '0' && c <= '9') {
			i++
			continue
		}
		break
	}
	if i == 0 || i >= len(seg) || seg[i] != '=' {
		return "", "", false
	}
	if seg[0] == '-' || seg[0] == ':' {
		return "", "", false
	}
	return seg[:i], seg[i+1:], true
}

// textPseudos are the pseudo-classes that match on an element's text.
var textPseudos = []string{":has-text(", ":text(", ":text-is(", ":has-not-text(", ":-soup-contains(",
	":-soup-contains-own(", ":contains(", ":text-matches(", ":matches-css("}

func probeCSS(seg string) string {
	for _, p := range textPseudos {
		rest := seg
		for {
			i := strings.Index(rest, p)
			if i < 0 {
				break
			}
			arg, ok := parenArg(rest[i+len(p)-1:])
			if !ok {
				return whyMalform
			}
			if p == ":text-matches(" {
				return whyRegex
			}
			if why := probeText(arg); why != "" {
				return why
			}
			rest = rest[i+len(p):]
		}
	}
	return attributeDigits(seg)
}

// probeText reads the body of a text match.
func probeText(body string) string {
	t := strings.TrimSpace(body)
	if strings.HasPrefix(t, "/") {
		return whyRegex
	}
	if hasDigit(t) {
		return whyDigit
	}
	return ""
}

var xpathTextFns = []string{"text()", "string(", "normalize-space(", "contains(", "starts-with(", "ends-with(",
	"substring", "matches(", "concat(", "lang(", "replace(", "tokenize(", "data(", "string-join("}

var xpathMeasureFns = []string{"string-length(", "translate(", "number(", "sum(", "floor(", "ceiling(", "round("}

func probeXPath(x string) string {
	for _, f := range xpathMeasureFns {
		if strings.Contains(x, f) {
			return whyXPath
		}
	}
	compact := strings.Join(strings.Fields(x), "")
	readsText := strings.Contains(compact, ".=") || strings.Contains(compact, ".!=") ||
		strings.Contains(compact, ".<") || strings.Contains(compact, ".>") || strings.Contains(compact, "[.]")
	for _, f := range xpathTextFns {
		if strings.Contains(x, f) {
			readsText = true
		}
	}
	if readsText && hasDigit(x) {
		return whyXPath
	}
	for _, lit := range quotedStrings(x) {
		if hasDigit(lit) {
			return whyXPath
		}
	}
	return ""
}

// structuralAttrs may be compared with digits: they name markup, not what
// the page echoes.
var structuralAttrs = map[string]bool{
	"id": true, "name": true, "class": true, "type": true, "for": true, "autocomplete": true,
	"role": true, "data-testid": true, "data-test-id": true, "data-test": true, "data-qa": true,
	"data-cy": true, "data-id": true, "form": true, "href": true, "src": true, "inputmode": true,
	"tabindex": true, "maxlength": true, "minlength": true, "size": true, "aria-level": true,
	"aria-labelledby": true, "aria-describedby": true, "aria-controls": true, "level": true,
}

// attrTest is one [name op value] found in a selector.
type attrTest struct {
	name, op, value string
}

// valueAttribute refuses any attribute test (CSS brackets or XPath @) on a
// value-like attribute.
func valueAttribute(seg string) string {
	for _, a := range attributeTests(seg) {
		if strings.Contains(a.name, "value") {
			return whyValue
		}
	}
	for i := strings.IndexByte(seg, '@'); i >= 0; {
		j := i + 1
		for j < len(seg) && (isNameByte(seg[j]) || seg[j] == ' ') {
			j++
		}
		if strings.Contains(seg[i+1:j], "value") {
			return whyValue
		}
		k := strings.IndexByte(seg[i+1:], '@')
		if k < 0 {
			break
		}
		i += k + 1
	}
	return ""
}

func attributeDigits(seg string) string {
	for _, a := range attributeTests(seg) {
		if a.op == "" {
			continue
		}
		// Playwright reads an unquoted /.../ as a regular expression (role
		// names, internal:attr); CSS has no such value.
		if strings.HasPrefix(a.value, "/") {
			return whyRegex
		}
		if !hasDigit(a.value) {
			continue
		}
		if !structuralAttrs[strings.TrimPrefix(a.name, "*|")] {
			return whyDigit
		}
	}
	return ""
}

// attributeTests lists the [...] groups of a selector, quote-aware.
func attributeTests(s string) []attrTest {
	var out []attrTest
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			i = skipQuoted(s, i)
		case '[':
			end := closingBracket(s, i)
			if end < 0 {
				end = len(s)
			}
			out = append(out, parseAttr(s[i+1:end]))
			i = end
		}
	}
	return out
}

func parseAttr(body string) attrTest {
	body = strings.TrimSpace(body)
	i := 0
	for i < len(body) && (isNameByte(body[i]) || body[i] == '|' || body[i] == '*' || body[i] == '\\') {
		i++
	}
	a := attrTest{name: strings.TrimSpace(body[:i])}
	rest := strings.TrimSpace(body[i:])
	for _, op := range []string{"~=", "|=", "^=", "$=", "*=", "!=", "="} {
		if strings.HasPrefix(rest, op) {
			a.op = op
			a.value = strings.TrimSpace(rest[len(op):])
			break
		}
	}
	return a
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' || c >= 0x80
}

// closingBracket finds the ']' matching s[open], skipping quoted strings.
func closingBracket(s string, open int) int {
	for i := open + 1; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			i = skipQuoted(s, i)
		case ']':
			return i
		}
	}
	return -1
}

// skipQuoted returns the index of the quote closing the string opened at
// s[i], or len(s)-1 when it never closes.
func skipQuoted(s string, i int) int {
	j, _ := closeQuote(s, i)
	return j
}

// closeQuote is skipQuoted that also says whether the string closed.
func closeQuote(s string, i int) (int, bool) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' {
			j++
			continue
		}
		if s[j] == q {
			return j, true
		}
	}
	return len(s) - 1, false
}

// balanced reports whether quotes, brackets and parentheses close.
func balanced(s string) bool {
	var stack []byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
		case '"', '\'':
			j, ok := closeQuote(s, i)
			if !ok {
				return false
			}
			i = j
		case '(', '[':
			stack = append(stack, c)
		case ')', ']':
			want := byte('(')
			if c == ']' {
				want = '['
			}
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0
}

func quotedStrings(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\'' {
			j := skipQuoted(s, i)
			out = append(out, s[i+1:max(j, i+1)])
			i = j
		}
	}
	return out
}

// parenArg returns what is inside the parentheses opening at s[0].
func parenArg(s string) (string, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\'':
			j, ok := closeQuote(s, i)
			if !ok {
				return "", false
			}
			i = j
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
}

// splitChain splits a Playwright selector on ">>" outside quotes and
// brackets. It fails on unbalanced quotes, so a quoted ">>" cannot hide a
// segment from the checks.
func splitChain(s string) ([]string, bool) {
	if !balanced(s) {
		return nil, false
	}
	var segs []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"', '\'':
			i = skipQuoted(s, i)
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '>':
			if depth == 0 && i+1 < len(s) && s[i+1] == '>' {
				segs = append(segs, s[start:i])
				i++
				start = i + 1
			}
		}
	}
	return append(segs, s[start:]), true
}

func hasDigit(s string) bool {
	for _, r := range s {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// decodeCSSEscapes resolves CSS escapes ("\61" is 'a', "\34 " is '4', "\."
// is '.') so "[v\61lue]" is seen as "[value]".
func decodeCSSEscapes(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && j < i+7 && isHex(s[j]) {
			j++
		}
		if j == i+1 {
			r, n := utf8.DecodeRuneInString(s[j:])
			b.WriteRune(r)
			i = j + n - 1
			continue
		}
		v, _ := strconv.ParseUint(s[i+1:j], 16, 32)
		r := rune(v)
		if v == 0 || v > unicode.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		if j < len(s) && s[j] == ' ' {
			j++
		}
		i = j - 1
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// IsRefSelector reports whether sel uses a snapshot ref (aria-ref=eN)
// anywhere, including after ">>". Fills refuse refs: they fill by CSS.
func IsRefSelector(sel string) bool {
	return strings.Contains(strings.ToLower(sel), "aria-ref=")
}

// hintForbidden are the non-CSS constructs a page hint may not use: a hint
// points at an element, it does not search for one.
var hintForbidden = []string{">>", ":has-text(", ":text(", ":text-is(", ":text-matches(", ":has-not-text(",
	":visible", ":nth-match(", ":left-of(", ":right-of(", ":above(", ":below(", ":near(",
	":-soup-contains", ":contains(", "internal:", "aria-ref"}

// ValidateHintSelector checks a declare_page_hint selector or frame (seed
// 004): plain CSS only (no text=, :has-text(), >>, XPath, _react=, :visible,
// nor any other engine prefix or Playwright pseudo-class), at most 512
// characters, balanced. After a fill, attribute-value comparisons such as
// [data-testid="total"] are refused too; presence tests like [data-total]
// stay allowed. Refusals are invalid_hint.
func ValidateHintSelector(sel string, afterFill bool) error {
	bad := func(why string) error {
		return agentvault.Errorf(agentvault.CodeInvalidHint, "hint selector %s", why)
	}
	t := strings.TrimSpace(sel)
	if t == "" {
		return bad("is empty")
	}
	if n := utf8.RuneCountInString(sel); n > MaxHintSelectorRunes {
		return bad("is longer than 512 characters")
	}
	if !utf8.ValidString(sel) {
		return bad("is not valid UTF-8")
	}
	for _, r := range sel {
		if unicode.IsControl(r) && r != ' ' && r != '\t' {
			return bad("holds control characters")
		}
	}
	for _, form := range []string{t, decodeCSSEscapes(t)} {
		l := strings.ToLower(form)
		if !balanced(l) {
			return bad("is malformed (unbalanced quotes or brackets)")
		}
		switch l[0] {
		case '/', '(', '"', '\'':
			return bad("must be plain CSS (no XPath or text selector)")
		}
		if strings.HasPrefix(l, "..") {
			return bad("must be plain CSS (no XPath)")
		}
		if _, _, ok := enginePrefix(l); ok {
			return bad("must be plain CSS (no selector engine prefix)")
		}
		for _, f := range hintForbidden {
			if strings.Contains(outsideQuotes(l), f) {
				return bad("must be plain CSS (no Playwright text, layout or chaining selectors)")
			}
		}
		if afterFill {
			for _, a := range attributeTests(l) {
				if a.op != "" {
					return bad("compares an attribute value, which is refused after a fill; use an id, a class or a presence test such as [data-total]")
				}
			}
		}
	}
	return nil
}

// outsideQuotes blanks quoted strings so a forbidden construct is looked
// for only in the selector's own syntax.
func outsideQuotes(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		if b[i] == '"' || b[i] == '\'' {
			j := skipQuoted(s, i)
			for k := i + 1; k < j && k < len(b); k++ {
				b[k] = ' '
			}
			i = j
		}
	}
	return string(b)
}
