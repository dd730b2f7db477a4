package leakcheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// TestNoBareLogGrep keeps the package doc's rule: no test outside this
// package searches log text for a value with strings/bytes.Contains, Index,
// LastIndex or Count, or with a regexp built at run time. Only a string
// constant of at least MinLong bytes may be searched for (an assertion that
// a known line was written); every other search of a log is a canary check
// and goes through a Checker, which knows how to read a short value.
func TestNoBareLogGrep(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (bench)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == filepath.Join(root, "internal", "leakcheck") {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, v := range bareLogGreps(t, path) {
			t.Errorf("%s:%d: %s searches log text for %s; use internal/leakcheck (its package doc says why)", rel, v.line, v.call, v.needle)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked only %d test files from %s: the walk is not looking at the tree", files, root)
	}
}

// TestRuleCatchesTheFlake: the rule fires on the checks that flaked or
// could have (a short or run-time value against log text, directly, through
// a variable or a loop), and not on assertions of known lines.
func TestRuleCatchesTheFlake(t *testing.T) {
	src := `package x
import ("bytes"; "regexp"; "strings")
const cvv = "737"
const line = "tool=fill_checkout status=ok"
func f(h *harness, standIns map[string]string, v, other string) {
	for _, txt := range append(h.all, h.logs.String()) {
		for _, v := range standIns {
			if strings.Contains(txt, v) {}
		}
	}
	_ = strings.Contains(logs.String(), cvv)
	_ = bytes.Contains(ap.logs.Bytes(), []byte(v))
	s := proxydLogs.String()
	_ = strings.Index(s, "=" + v)
	_ = regexp.MustCompile("(^|[^0-9])" + regexp.QuoteMeta(v)).MatchString(h.logs.String())
	_ = strings.Count(agent.logs.String(), "ms=7")
	// Not violations:
	_ = strings.Contains(logs.String(), line)
	_ = strings.Contains(logs.String(), "code=amount_mismatch")
	_ = strings.Contains(body, v)
	_ = strings.Contains(ap.login.password, v)
	_ = strings.Contains(catalog, v)
}
`
	dir := t.TempDir()
	p := filepath.Join(dir, "x_test.go")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, v := range bareLogGreps(t, p) {
		lines = append(lines, v.line)
	}
	want := []int{8, 11, 12, 14, 15, 16}
	if len(lines) != len(want) {
		t.Fatalf("violations on lines %v, want %v", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Fatalf("violations on lines %v, want %v", lines, want)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/agentvault/agentvault\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod of github.com/agentvault/agentvault not found above the working directory")
		}
		dir = parent
	}
}

type violation struct {
	line         int
	call, needle string
}

// searchFuncs are the calls that look for a needle (second argument) in a
// haystack (first argument).
var searchFuncs = map[string]bool{
	"strings.Contains": true, "strings.Index": true, "strings.LastIndex": true, "strings.Count": true,
	"bytes.Contains": true, "bytes.Index": true, "bytes.LastIndex": true, "bytes.Count": true,
}

// regexpMethods are the *regexp.Regexp methods whose argument is searched.
var regexpMethods = map[string]bool{
	"MatchString": true, "Match": true, "FindString": true, "FindStringIndex": true, "FindIndex": true,
	"FindAllString": true, "FindAllStringIndex": true, "FindStringSubmatch": true, "Find": true,
}

// logWords are the words that make a name a log.
var logWords = map[string]bool{"log": true, "logs": true, "logged": true, "logger": true}

func bareLogGreps(t *testing.T, path string) []violation {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	consts := packageConsts(filepath.Dir(path))
	var out []violation
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		b := bindings(fn.Body)
		isLog := func(e ast.Expr) bool { return mentionsLog(e, b, 1) }
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := callName(call.Fun)
			switch {
			case searchFuncs[name] && len(call.Args) == 2:
				if isLog(call.Args[0]) {
					if s, ok := constString(call.Args[1], consts); !ok || len(s) < MinLong {
						out = append(out, violation{fset.Position(call.Pos()).Line, name, describe(call.Args[1], s, ok)})
					}
				}
			case name == "regexp.MatchString" && len(call.Args) == 2:
				if _, ok := constString(call.Args[0], consts); !ok && isLog(call.Args[1]) {
					out = append(out, violation{fset.Position(call.Pos()).Line, name, "a pattern built at run time"})
				}
			default:
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !regexpMethods[sel.Sel.Name] || len(call.Args) == 0 || !isLog(call.Args[0]) {
					return true
				}
				if pat, ok := compiledFrom(sel.X, b); ok {
					if _, ok := constString(pat, consts); !ok {
						out = append(out, violation{fset.Position(call.Pos()).Line, "regexp " + sel.Sel.Name, "a pattern built at run time"})
					}
				}
			}
			return true
		})
	}
	return out
}

func describe(e ast.Expr, s string, isConst bool) string {
	if isConst {
		return "a constant of " + strconv.Itoa(len(s)) + " bytes"
	}
	return "a value only known at run time"
}

// packageConsts collects the string constants of every Go file in dir
// (scoping is ignored: a name means its literal wherever it is declared).
func packageConsts(dir string) map[string]string {
	if c, ok := constCache.Load(dir); ok {
		return c.(map[string]string)
	}
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range files {
		if g, err := parser.ParseFile(token.NewFileSet(), p, nil, 0); err == nil {
			for k, v := range constStrings(g) {
				out[k] = v
			}
		}
	}
	constCache.Store(dir, out)
	return out
}

var constCache sync.Map // dir -> map[string]string

func callName(fun ast.Expr) string {
	if sel, ok := fun.(*ast.SelectorExpr); ok {
		if id, ok := sel.X.(*ast.Ident); ok {
			return id.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// constStrings collects the string constants declared in f, at any level.
func constStrings(f *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		g, ok := n.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			return true
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := constString(vs.Values[i], out); ok {
						out[name.Name] = s
					}
				}
			}
		}
		return true
	})
	return out
}

// constString evaluates a string constant expression: literals, named
// constants, concatenations, and string(...) or []byte(...) of them.
func constString(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return constString(e.X, consts)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := constString(e.X, consts)
			b, ok2 := constString(e.Y, consts)
			return a + b, ok1 && ok2
		}
	case *ast.CallExpr:
		if len(e.Args) == 1 {
			if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "string" {
				return constString(e.Args[0], consts)
			}
			if at, ok := e.Fun.(*ast.ArrayType); ok && at.Len == nil {
				if id, ok := at.Elt.(*ast.Ident); ok && id.Name == "byte" {
					return constString(e.Args[0], consts)
				}
			}
		}
	}
	return "", false
}

// bindings maps each local name of a function body to the expressions
// assigned to it (assignments, var declarations, range clauses).
func bindings(body *ast.BlockStmt) map[string][]ast.Expr {
	b := map[string][]ast.Expr{}
	bind := func(lhs ast.Expr, rhs ast.Expr) {
		if id, ok := lhs.(*ast.Ident); ok && id.Name != "_" && rhs != nil {
			b[id.Name] = append(b[id.Name], rhs)
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if len(n.Rhs) == len(n.Lhs) {
					bind(l, n.Rhs[i])
				} else if len(n.Rhs) == 1 {
					bind(l, n.Rhs[0])
				}
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					bind(name, n.Values[i])
				}
			}
		case *ast.RangeStmt:
			bind(n.Key, n.X)
			bind(n.Value, n.X)
		}
		return true
	})
	return b
}

// mentionsLog reports whether e names a log, directly or through a local
// variable bound to an expression that names one (one step: s :=
// logs.String(), for _, l := range logs). Following longer chains would
// call every response a log whose client was built with a logger.
func mentionsLog(e ast.Expr, b map[string][]ast.Expr, depth int) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if found {
			return false
		}
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		id, ok := n.(*ast.Ident)
		if !ok {
			return true
		}
		if isLogName(id.Name) {
			found = true
			return false
		}
		if depth > 0 {
			for _, rhs := range b[id.Name] {
				if mentionsLog(rhs, b, depth-1) {
					found = true
					return false
				}
			}
		}
		return true
	})
	return found
}

// compiledFrom returns the pattern of a regexp compiled in e (directly or
// through a local variable).
func compiledFrom(e ast.Expr, b map[string][]ast.Expr) (ast.Expr, bool) {
	switch x := e.(type) {
	case *ast.CallExpr:
		if n := callName(x.Fun); (n == "regexp.MustCompile" || n == "regexp.Compile") && len(x.Args) == 1 {
			return x.Args[0], true
		}
	case *ast.Ident:
		for _, rhs := range b[x.Name] {
			if p, ok := compiledFrom(rhs, b); ok {
				return p, true
			}
		}
	case *ast.ParenExpr:
		return compiledFrom(x.X, b)
	}
	return nil, false
}

// isLogName splits an identifier into words (camel case, digits,
// underscores) and looks for a log word: logs, proxydLogs, logBuf and
// logs2 are logs; login, catalog and dialog are not.
func isLogName(name string) bool {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	for _, w := range words {
		if logWords[w] {
			return true
		}
	}
	return false
}
