package browser

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// The snapshot's YAML is Playwright's AI-mode accessibility tree, rewritten
// so that it keeps what an agent acts on and reads, and drops what it never
// acts on (issue 23):
//   - a generic wrapper with no name is replaced by its children (its text,
//     if it has only text), so is the main landmark and a list item holding
//     one element;
//   - refs stay on elements an agent can act on (interactiveRoles, fields
//     among them, anything Playwright saw a pointer cursor on, iframes);
//     other elements lose theirs, and [cursor=pointer] goes where the role
//     already says it is clickable;
//   - a text that repeats the name of its parent or of an element next to
//     it (a field's label beside the field) is dropped, so is an image with
//     no name, an image that repeats such a name, a heading that repeats its
//     region's, the symbols inside a named image (a star rating's ★★★☆☆) and
//     an icon glyph or label text a control's name already says; a link or
//     button whose only content is an image takes the image's name; texts
//     side by side read as one;
//   - a field's value is never shown (inline, or as a text child); its
//     placeholder goes on its line;
//   - runs of a select's plain options go on one line (foldOptions).
// Every field keeps its ref; the field list and the iframe refs are taken
// from the tree as it is rewritten.

// fieldRoles are the roles a fill can target; their values are cut and they
// get a CSS selector.
var fieldRoles = map[string]bool{
	"textbox": true, "searchbox": true, "spinbutton": true, "combobox": true,
	"checkbox": true, "radio": true, "slider": true, "switch": true, "listbox": true,
}

// fieldRolesJS is fieldRoles as a JavaScript object literal, for the
// page's field list (fieldsFunc).
var fieldRolesJS = func() string {
	b, _ := json.Marshal(fieldRoles)
	return string(b)
}()

// interactiveRoles keep their refs: the roles an agent clicks, presses,
// types into, counts or waits for by ref.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "spinbutton": true,
	"combobox": true, "listbox": true, "option": true, "checkbox": true, "radio": true,
	"switch": true, "slider": true, "tab": true, "menuitem": true, "menuitemcheckbox": true,
	"menuitemradio": true, "treeitem": true, "gridcell": true, "scrollbar": true, "iframe": true,
}

// textOnly are the roles that, with no name, no ref and only text inside,
// are read as that text.
var textOnly = map[string]bool{
	"generic": true, "none": true, "paragraph": true, "strong": true, "emphasis": true, "time": true,
	"code": true, "mark": true, "deletion": true, "insertion": true, "subscript": true, "superscript": true,
}

// pointerImplied are the roles whose [cursor=pointer] says nothing new.
var pointerImplied = map[string]bool{
	"button": true, "link": true, "checkbox": true, "radio": true, "switch": true, "tab": true,
	"option": true, "menuitem": true, "menuitemcheckbox": true, "menuitemradio": true, "treeitem": true,
}

type snapNode struct {
	kind     byte   // 'e' element, 't' text, 'p' property (/url:), 'r' a line that is none of these
	role     string // element role
	name     string // element accessible name ("" when none)
	attrs    []string
	ref      string
	pointer  bool
	inline   string // the rendered value after ": " (YAML as written)
	colon    bool   // the key ended with ":" (children or properties follow)
	raw      string // kind 'r' and 'p': the line's content after the indent
	children []*snapNode
}

// parseSnapshot reads Playwright's AI-mode YAML into a tree. Lines it does
// not recognise are kept as they are (kind 'r'), under the element they
// are indented under.
func parseSnapshot(raw string) []*snapNode {
	type level struct {
		indent int
		n      *snapNode
	}
	var roots []*snapNode
	var stack []level
	for _, ln := range strings.Split(raw, "\n") {
		if strings.TrimSpace(ln) == "" {
			continue
		}
		ind := len(ln) - len(strings.TrimLeft(ln, " "))
		body := ln[ind:]
		for len(stack) > 0 && ind <= stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		var n *snapNode
		if item, ok := strings.CutPrefix(body, "- "); ok {
			n = parseItem(item)
		} else {
			n = &snapNode{kind: 'r', raw: body}
		}
		if len(stack) == 0 {
			roots = append(roots, n)
		} else {
			p := stack[len(stack)-1].n
			p.children = append(p.children, n)
		}
		stack = append(stack, level{ind, n})
	}
	return roots
}

// parseItem reads one "- ..." item.
func parseItem(item string) *snapNode {
	if v, ok := strings.CutPrefix(item, "text: "); ok {
		return &snapNode{kind: 't', inline: v}
	}
	if strings.HasPrefix(item, "/") {
		return &snapNode{kind: 'p', raw: "- " + item}
	}
	key, rest := item, ""
	if strings.HasPrefix(item, "'") {
		// A key Playwright had to quote (its name holds ": " or the like).
		k, r, ok := unquoteSingle(item)
		if !ok {
			return &snapNode{kind: 'r', raw: "- " + item}
		}
		key, rest = k, r
	} else if i := keyEnd(item); i >= 0 {
		key, rest = item[:i], item[i:]
	}
	n := &snapNode{kind: 'e'}
	i := 0
	for i < len(key) && key[i] >= 'a' && key[i] <= 'z' {
		i++
	}
	if i == 0 {
		return &snapNode{kind: 'r', raw: "- " + item}
	}
	n.role = key[:i]
	k := key[i:]
	if strings.HasPrefix(k, ` "`) {
		end := quotedEnd(k[1:])
		if end < 0 {
			return &snapNode{kind: 'r', raw: "- " + item}
		}
		if name, ok := unquoteJSON(k[1 : 1+end]); ok {
			n.name = name
		} else {
			return &snapNode{kind: 'r', raw: "- " + item}
		}
		k = k[1+end:]
	}
	for strings.HasPrefix(k, " [") {
		j := strings.IndexByte(k, ']')
		if j < 0 {
			return &snapNode{kind: 'r', raw: "- " + item}
		}
		a := k[1 : j+1]
		switch {
		case strings.HasPrefix(a, "[ref="):
			n.ref = a[5 : len(a)-1]
		case a == "[cursor=pointer]":
			n.pointer = true
		default:
			n.attrs = append(n.attrs, a)
		}
		k = k[j+1:]
	}
	if k != "" {
		return &snapNode{kind: 'r', raw: "- " + item}
	}
	switch {
	case rest == "":
	case rest == ":":
		n.colon = true
	case strings.HasPrefix(rest, ": "):
		n.inline = rest[2:]
	default:
		return &snapNode{kind: 'r', raw: "- " + item}
	}
	return n
}

// keyEnd is where an unquoted key ends: the first ":" that is outside the
// quoted name and the bracketed attributes and is followed by a space or
// the end.
func keyEnd(s string) int {
	inQ, inB := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQ:
			if c == '\\' {
				i++
			} else if c == '"' {
				inQ = false
			}
		case c == '"':
			inQ = true
		case c == '[':
			inB = true
		case c == ']':
			inB = false
		case c == ':' && !inB && (i+1 == len(s) || s[i+1] == ' '):
			return i
		}
	}
	return -1
}

// quotedEnd is the index just past the JSON string that starts s.
func quotedEnd(s string) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == '"' {
			return i + 1
		}
	}
	return -1
}

// unquoteSingle reads a YAML single-quoted key and what follows it.
func unquoteSingle(s string) (string, string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '\'' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", "", false
}

// compactNodes rewrites a list of siblings under parent (nil at the top).
func compactNodes(list []*snapNode, parent *snapNode) []*snapNode {
	var out []*snapNode
	for _, n := range list {
		out = append(out, compactNode(n)...)
	}
	// Texts and images that only repeat a neighbour's or the parent's name.
	pname := ""
	if parent != nil {
		pname = parent.name
	}
	kept := make([]*snapNode, 0, len(out))
	for i, n := range out {
		var text string
		switch {
		case n.kind == 't':
			text = yamlText(n.inline)
		case n.kind == 'e' && n.role == "img" && n.ref == "" && len(n.children) == 0:
			text = n.name
		case n.kind == 'e' && n.role == "heading" && n.ref == "" && len(n.children) == 0 && n.inline == "" && normSpace(n.name) == normSpace(pname):
			continue // a region named by its own heading
		default:
			kept = append(kept, n)
			continue
		}
		t := normSpace(text)
		dup := t != "" && (t == normSpace(pname) ||
			(i > 0 && out[i-1].kind == 'e' && t == normSpace(out[i-1].name)) ||
			(i+1 < len(out) && out[i+1].kind == 'e' && t == normSpace(out[i+1].name)))
		if dup {
			continue
		}
		if n.kind == 't' && len(kept) > 0 && kept[len(kept)-1].kind == 't' {
			// Texts side by side read as one line.
			prev := kept[len(kept)-1]
			kept[len(kept)-1] = &snapNode{kind: 't', inline: yamlScalar(yamlText(prev.inline) + " " + t)}
			continue
		}
		kept = append(kept, n)
	}
	return kept
}

// yamlScalar writes a text as a YAML value, quoted only where Playwright
// would quote it.
func yamlScalar(s string) string {
	if !yamlValueNeedsQuotes(s) {
		return s
	}
	return quoteJSON(s)
}

// yamlValueNeedsQuotes follows Playwright's yamlStringNeedsQuotes.
func yamlValueNeedsQuotes(s string) bool {
	if s == "" || s != strings.TrimSpace(s) || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "[") {
		return true
	}
	if strings.ContainsAny(s[:1], "&*],?!>|@\"'#%") {
		return true
	}
	if strings.Contains(s, ": ") || strings.HasSuffix(s, ":") || strings.Contains(s, " #") || strings.ContainsAny(s, "{}`\n\r") {
		return true
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "true", "false", "on", "off", "null":
		return true
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return true
	}
	return false
}

// compactNode rewrites one node; a wrapper comes back as its children.
func compactNode(n *snapNode) []*snapNode {
	if n.kind != 'e' {
		if n.kind == 'r' || n.kind == 'p' {
			n.children = compactNodes(n.children, nil)
		}
		return []*snapNode{n}
	}
	field := fieldRoles[n.role]
	if field {
		// A field's value never shows: not inline, not as text below it.
		// Its placeholder (a format hint, "MM / YY") goes on its line.
		n.inline = ""
		var ch []*snapNode
		for _, c := range n.children {
			if ph, ok := strings.CutPrefix(c.raw, "- /placeholder: "); ok && c.kind == 'p' {
				n.attrs = append(n.attrs, "[placeholder="+quoteJSON(yamlText(ph))+"]")
				continue
			}
			if c.kind != 't' && c.kind != 'r' {
				ch = append(ch, c)
			}
		}
		n.children = ch
	}
	n.children = compactNodes(n.children, n)
	keepRef := n.ref != "" && (interactiveRoles[n.role] || n.pointer)
	if !keepRef {
		n.ref, n.pointer = "", false
	} else if pointerImplied[n.role] {
		n.pointer = false
	}
	if n.inline != "" && n.name != "" && (n.role == "img" || glyphs(yamlText(n.inline)) || strings.Contains(strings.ToLower(n.name), strings.ToLower(normSpace(yamlText(n.inline))))) {
		// The symbols a named image draws, an icon glyph on a named
		// control, a label its name already says.
		n.inline = ""
	}
	if n.name == "" && n.ref != "" && (n.role == "link" || n.role == "button") {
		// A control whose only content is an image is named by it.
		var img *snapNode
		others := 0
		for _, c := range n.children {
			switch {
			case c.kind == 'e' && c.role == "img" && c.name != "" && c.ref == "" && len(c.children) == 0:
				img = c
			case c.kind != 'p':
				others++
			}
		}
		if img != nil && others == 0 && n.inline == "" {
			n.name = img.name
			n.children = slicesDelete(n.children, img)
		}
	}
	if (n.role == "generic" || n.role == "none") && n.name == "" && n.ref == "" {
		n.attrs = nil // [active] on a wrapper: the focused field says it
	}
	if n.role == "main" && n.name == "" && n.ref == "" && len(n.attrs) == 0 && n.inline == "" {
		// The main landmark is what is not in the banner, navigation or
		// footer: its wrapper says nothing more.
		return n.children
	}
	if textOnly[n.role] && n.name == "" && n.ref == "" && len(n.attrs) == 0 {
		if n.inline != "" && len(n.children) == 0 {
			return []*snapNode{{kind: 't', inline: n.inline}}
		}
		if n.role == "generic" || n.role == "none" {
			return n.children
		}
	}
	if n.role == "listitem" && n.name == "" && n.ref == "" && len(n.attrs) == 0 && n.inline == "" && len(n.children) == 1 && n.children[0].kind == 'e' {
		return n.children // a list item holding one element is that element
	}
	if n.role == "img" && n.name == "" && n.ref == "" && len(n.children) == 0 && n.inline == "" {
		return nil // decorative
	}
	if !field && n.ref == "" && n.name == "" && n.inline == "" && len(n.children) == 0 && len(n.attrs) == 0 {
		return nil // an empty container says nothing
	}
	return []*snapNode{n}
}

// yamlText is the text of an inline YAML scalar as Playwright writes it.
func yamlText(v string) string {
	if strings.HasPrefix(v, `"`) {
		if s, ok := unquoteJSON(v); ok {
			return s
		}
	}
	return v
}

// normSpace collapses runs of white space to one space and trims the ends.
func normSpace(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || (c <= ' ' && (c != ' ' || i == 0 || i == len(s)-1 || s[i+1] == ' ')) {
			return strings.Join(strings.Fields(s), " ")
		}
	}
	return s
}

// quoteJSON writes s as a JSON string the way JavaScript's JSON.stringify
// does (Playwright quotes names with it): only quotes, backslashes and
// control characters are escaped, not <, > and & as encoding/json does.
func quoteJSON(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&15])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// unquoteJSON reads a JSON string literal (quotes included); one with no
// escape is cut out as it is.
func unquoteJSON(q string) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	if !strings.ContainsAny(q[1:len(q)-1], "\\\"") {
		return q[1 : len(q)-1], true
	}
	var s string
	if json.Unmarshal([]byte(q), &s) != nil {
		return "", false
	}
	return s, true
}

// glyphs reports whether s has no letter or digit: an icon's symbols.
func glyphs(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

func slicesDelete(list []*snapNode, n *snapNode) []*snapNode {
	out := list[:0]
	for _, c := range list {
		if c != n {
			out = append(out, c)
		}
	}
	return out
}

// renderSnapshot writes the tree back as YAML lines.
func renderSnapshot(list []*snapNode) []string {
	var out []string
	var walk func(list []*snapNode, depth int)
	walk = func(list []*snapNode, depth int) {
		ind := strings.Repeat("  ", depth)
		for _, n := range list {
			switch n.kind {
			case 't':
				out = append(out, ind+"- text: "+n.inline)
			case 'p', 'r':
				out = append(out, ind+n.raw)
			default:
				out = append(out, ind+"- "+elementKey(n))
			}
			walk(n.children, depth+1)
		}
	}
	walk(list, 0)
	return out
}

// elementKey is an element's line after "- ".
func elementKey(n *snapNode) string {
	var b strings.Builder
	b.WriteString(n.role)
	if n.name != "" {
		b.WriteByte(' ')
		b.WriteString(quoteJSON(n.name))
	}
	for _, a := range n.attrs {
		b.WriteByte(' ')
		b.WriteString(a)
	}
	if n.ref != "" {
		b.WriteString(" [ref=" + n.ref + "]")
		if n.pointer {
			b.WriteString(" [cursor=pointer]")
		}
	}
	key := b.String()
	if yamlKeyNeedsQuotes(key) {
		key = "'" + strings.ReplaceAll(key, "'", "''") + "'"
	}
	switch {
	case n.inline != "":
		return key + ": " + n.inline
	case len(n.children) > 0:
		return key + ":"
	}
	return key
}

// yamlKeyNeedsQuotes is the part of Playwright's yamlStringNeedsQuotes a
// key (role, quoted name, attributes) can meet.
func yamlKeyNeedsQuotes(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ':':
			if i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\n' {
				return true
			}
		case '#':
			if i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
				return true
			}
		case '{', '}', '`', '\n', '\r':
			return true
		}
	}
	return false
}

type frameRef struct {
	ref      string // the iframe element's ref
	parent   string // ref of the enclosing iframe, "" at top
	selector string
}

// snapshotFields lists the fields of a rewritten tree (document order) with
// each one's enclosing iframe ref, and the iframes.
func snapshotFields(list []*snapNode) ([]Field, map[string]*frameRef) {
	var fields []Field
	frames := map[string]*frameRef{}
	var walk func(list []*snapNode, frame string)
	walk = func(list []*snapNode, frame string) {
		for _, n := range list {
			inner := frame
			if n.kind == 'e' {
				switch {
				case n.role == "iframe" && n.ref != "":
					frames[n.ref] = &frameRef{ref: n.ref, parent: frame}
					inner = n.ref
				case fieldRoles[n.role] && n.ref != "":
					fields = append(fields, Field{Ref: n.ref, Role: n.role, Name: n.name, Frame: frame})
				}
			}
			walk(n.children, inner)
		}
	}
	walk(list, "")
	return fields, frames
}

// compactSnapshot rewrites Playwright's AI-mode YAML (see the top of this
// file) and returns it with its fields and iframes.
func compactSnapshot(raw string) (string, []Field, map[string]*frameRef) {
	tree := compactNodes(parseSnapshot(raw), nil)
	fields, frames := snapshotFields(tree)
	return strings.Join(foldOptions(renderSnapshot(tree)), "\n"), fields, frames
}

// plainOption is an option line with no ref and no children: a <select>'s
// option (a listbox's options that carry refs are left alone).
var plainOption = regexp.MustCompile(`^(\s*)- option((?: "(?:[^"\\]|\\.)*")?(?: \[(?:selected|disabled|checked)\])*)$`)

// optionItem is one option of a folded line: its name bare, or JSON-quoted
// when bare it could be misread (quotes, "|", brackets, YAML punctuation),
// then its states.
func optionItem(m string) string {
	m = strings.TrimPrefix(m, " ")
	if !strings.HasPrefix(m, `"`) {
		return strings.TrimSpace(`"" ` + m) // an option with no name: its states only
	}
	end := quotedEnd(m)
	var name string
	ok := end >= 0
	if ok {
		name, ok = unquoteJSON(m[:end])
	}
	if !ok || name == "" {
		return m
	}
	if name != strings.TrimSpace(name) || strings.ContainsAny(name, "\"|[]{}#`\\\n\r") || strings.Contains(name, ": ") ||
		strings.HasSuffix(name, ":") || strings.ContainsAny(name[:1], "&*!%@'>?,-") {
		return m
	}
	return name + m[end:]
}

// foldOptions writes each run of two or more sibling plain options on one
// line, `- options: A [selected] | B | ...`: the same names and states in a
// fraction of the characters (a country or year list is most of a
// checkout's snapshot otherwise).
func foldOptions(lines []string) []string {
	out := lines[:0]
	for i := 0; i < len(lines); {
		m := plainOption.FindStringSubmatch(lines[i])
		if m == nil {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i + 1
		items := []string{optionItem(m[2])}
		for ; j < len(lines); j++ {
			n := plainOption.FindStringSubmatch(lines[j])
			if n == nil || n[1] != m[1] {
				break
			}
			items = append(items, optionItem(n[2]))
		}
		if j-i < 2 {
			out = append(out, lines[i])
		} else {
			out = append(out, m[1]+"- options: "+strings.Join(items, " | "))
		}
		i = j
	}
	return out
}
