package agentvault_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goPackage is the part of `go list -json` these tests read.
type goPackage struct {
	ImportPath string
	Doc        string
	Imports    []string
	Deps       []string
	Standard   bool
}

const module = "github.com/agentvault/agentvault"

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(out)
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	return pkgs
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

func hasPrefixAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}

// TestLayeringRules keeps the architecture in docs/DESIGN.md true: domain
// packages import no adapter, and each heavy dependency has exactly one owner.
// (After tailscale's tstest/deptest.)
func TestLayeringRules(t *testing.T) {
	const (
		goproxy    = "github.com/elazarl/goproxy"
		playwright = "github.com/mxschmitt/playwright-go"
		mcpSDK     = "github.com/modelcontextprotocol/go-sdk"
		sqliteDrv  = "modernc.org/sqlite"
		pgx        = "github.com/jackc/pgx"
	)
	// Who may import each adapter dependency directly.
	owners := map[string][]string{
		goproxy:    {"intercept"},
		playwright: {"browser", "e2e"},
		mcpSDK:     {"mcpserver", "cmd/mcpd", "e2e"},
		sqliteDrv:  {"store/sqlite"},
		pgx:        {"store/postgres"},
	}
	// Packages that must not depend on these, even transitively.
	forbiddenDeps := map[string][]string{
		".":                 {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"tokens":            {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"policy":            {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"redact":            {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"vault":             {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"broker":            {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite", module + "/intercept", module + "/owner", module + "/control"},
		"control":           {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite"},
		"browser":           {goproxy, mcpSDK, sqliteDrv, pgx, module + "/vault"},
		"mcpserver":         {goproxy, sqliteDrv, pgx, module + "/store/sqlite", module + "/intercept"},
		"mcpserver/hosted":  {goproxy, playwright, sqliteDrv, pgx, module + "/browser", module + "/vault", module + "/owner", module + "/intercept"},
		"cmd/mcpd":          {goproxy, sqliteDrv, pgx, module + "/store/sqlite", module + "/intercept", module + "/owner"},
		"intercept/rewrite": {goproxy, playwright, mcpSDK, sqliteDrv, pgx},
		"owner":             {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite"},
		"owner/dashboard":   {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite"},
		"owner/notify":      {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite"},
		"credentials":       {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite", module + "/owner", module + "/intercept"},
		"skills":            {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/store/sqlite", module + "/owner", module + "/intercept"},
		"handoff":           {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/vault", module + "/owner", module + "/broker"},
		"apps":              {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/vault", module + "/owner", module + "/broker"},
		"botauth":           {goproxy, playwright, mcpSDK, sqliteDrv, pgx, module + "/vault", module + "/intercept", module + "/owner", module + "/broker"},
	}
	// Pure domain packages speak no HTTP themselves. (golang.org/x/net/publicsuffix
	// reaches net/http/cookiejar for an interface, so this is a direct-import rule.)
	noHTTP := []string{".", "tokens", "policy", "redact", "vault", "owner", "broker", "credentials", "skills", "botauth"}
	pkgs := listPackages(t)
	for _, p := range pkgs {
		name := rel(p.ImportPath)
		for _, imp := range p.Imports {
			if hasPrefixAny(imp, "net/http") && hasPrefixAny(name, noHTTP...) && !strings.Contains(name, "/") {
				t.Errorf("%s imports %s; domain packages speak no HTTP", name, imp)
			}
		}
		for _, imp := range p.Imports {
			for dep, allowed := range owners {
				if hasPrefixAny(imp, dep) && !hasPrefixAny(name, allowed...) {
					t.Errorf("%s imports %s; only %v may", name, imp, allowed)
				}
			}
		}
	}
	for pkg, deps := range forbiddenDeps {
		cmd := exec.Command("go", "list", "-deps", "./"+strings.TrimPrefix(pkg, "."))
		if pkg == "." {
			cmd = exec.Command("go", "list", "-deps", ".")
		}
		out, err := cmd.Output()
		if err != nil {
			// The package may not exist yet in an early tree.
			t.Logf("go list -deps %s: %v", pkg, err)
			continue
		}
		for _, d := range strings.Fields(string(out)) {
			for _, f := range deps {
				if hasPrefixAny(d, f) {
					t.Errorf("%s depends on %s (forbidden by docs/DESIGN.md)", pkg, d)
				}
			}
		}
	}
}

// TestPackageDocs asks every package to say what it owns and what it must
// never do (tailscale's pkgdoc_test).
func TestPackageDocs(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no doc comment", rel(p.ImportPath))
		}
	}
}

// domainImports is the direction table of docs/DESIGN.md between the
// domain packages and their nearest neighbours: for each package, the only
// project packages it may import directly ("." is the root package). An
// edge that is not listed is a layering bug, e.g. vault importing policy, or
// policy importing owner. (benbjohnson/wtf keeps the domain at the root and
// the adapters beside it; tailscale's deptest checks such edges.)
// internal/cardcheck: the duplicate-card rule of the CLI and the dashboard.
func init() { domainImports["internal/cardcheck"] = []string{".", "vault"} }

// internal/webtls: TLS for web listeners (the dashboard, mcpd's hosted
// server); nothing of the owner's side, so mcpd does not link it.
func init() { domainImports["internal/webtls"] = []string{"."} }

// internal/failguard: the one rule that slows down guessing (failed
// attempts per client, doubling waits), the standard library only; the
// dashboard's sign-in and proxyd's proxy listener use it.
func init() {
	domainImports["internal/failguard"] = []string{}
	domainImports["owner/dashboard"] = append(domainImports["owner/dashboard"], "internal/failguard")
	domainImports["proxyd"] = append(domainImports["proxyd"], "internal/failguard")
}

// internal/deploy: where a deployment's files and listeners are, for both
// daemons; mcpd links it, so nothing of the owner's or the vault's side.
func init() { domainImports["internal/deploy"] = []string{"."} }

// internal/tcplb: test support (a TCP balancer), the standard library only.
func init() { domainImports["internal/tcplb"] = []string{} }

// internal/httpsigtest: test support (a site's verifier of signed requests),
// the standard library only: it must not share code with botauth.
func init() { domainImports["internal/httpsigtest"] = []string{} }

// internal/leakcheck: test support (the canary checks of P11), the standard
// library only.
func init() { domainImports["internal/leakcheck"] = []string{} }

// internal/managedtest: test support (remote browsers and a double of the
// managed providers' session APIs), no project package.
func init() { domainImports["internal/managedtest"] = []string{} }

// broker/sessionstoretest: the conformance suite of broker.SessionStore.
func init() {
	domainImports["broker/sessionstoretest"] = []string{".", "broker", "hostname", "policy", "tokens", "vault"}
}

var domainImports = map[string][]string{
	".":                    {},
	"hostname":             {"."},
	"botauth":              {".", "hostname"},
	"authz":                {"."},
	"vault":                {".", "hostname", "vault/item"},
	"vault/item":           {},
	"tokens":               {".", "hostname", "vault/item"},
	"policy":               {".", "hostname", "vault/item"},
	"redact":               {"."},
	"control":              {".", "authz"},
	"owner":                {".", "hostname", "policy", "vault"},
	"owner/dashboard":      {".", "apps", "authz", "control", "credentials", "handoff", "hostname", "owner", "policy", "recipes", "vault", "internal/cardcheck"},
	"handoff":              {".", "control"},
	"apps":                 {".", "control"},
	"recipes":              {".", "hostname", "policy", "redact"},
	"owner/notify":         {".", "owner", "policy"},
	"intercept/rewrite":    {".", "hostname", "tokens", "vault"},
	"broker":               {".", "hostname", "policy", "tokens", "vault"},
	"intercept":            {".", "broker", "hostname", "intercept/rewrite", "tokens", "vault"},
	"browser":              {".", "hostname", "redact"},
	"mcpserver":            {".", "browser", "control", "redact", "tokens", "policy", "recipes", "skills", "internal/deploy", "mcpserver/hosted"},
	"mcpserver/hosted":     {".", "control"},
	"credentials":          {".", "authz", "credentials/credname", "vault"},
	"credentials/credname": {},
	"credentials/credtest": {".", "authz", "credentials", "vault"},
	"skills":               {".", "credentials/credname"},

	// Test support and conformance suites.
	"browser/browsertest":   {"browser"},
	"owner/ownertest":       {".", "owner", "policy", "policy/ledgertest", "vault"},
	"policy/ledgertest":     {".", "policy"},
	"recipes/recipestest":   {".", "recipes"},
	"vault/storetest":       {".", "vault"},
	"store/postgres/pgtest": {},
	"scripts/testsite":      {"internal/deploy"},

	// The stores: adapters of the domain packages' Store interfaces.
	"store/internal/groupcommit": {},
	"store/sqlite":               {".", "broker", "credentials", "owner", "policy", "recipes", "store/internal/groupcommit", "tokens", "vault"},
	"store/postgres":             {".", "broker", "credentials", "owner", "policy", "recipes", "store/internal/groupcommit", "tokens", "vault"},

	// The owner's command line.
	"internal/termio":   {},
	"internal/vaultcli": {".", "internal/cardcheck", "internal/termio", "store/sqlite", "vault"},
	"owner/ownercli":    {".", "internal/cardcheck", "internal/termio", "hostname", "owner", "policy", "vault"},

	// Wiring: these import what they wire, listed as it is today so that a new
	// edge is a decision, not an accident.
	"proxyd":       {".", "apps", "authz", "botauth", "broker", "control", "credentials", "handoff", "hostname", "intercept", "internal/deploy", "internal/vaultcli", "internal/webtls", "owner", "owner/dashboard", "owner/notify", "owner/ownercli", "policy", "recipes", "store/postgres", "tokens", "vault"},
	"cmd/proxyd":   {"proxyd"},
	"cmd/mcpd":     {"internal/deploy", "internal/webtls", "mcpserver"},
	"e2e":          {}, // its tests import everything; the package itself nothing
	"e2e/merchant": {},
	"e2e/corpus":   {},
	"e2e/benchmcp": {"e2e/corpus", "proxyd", "vault"},
}

// TestMcpdLinksNeitherOwnerNorVault: the mcpd binary speaks the control API
// and never holds the owner's state or the vault's (docs/DESIGN.md), so
// neither package is even linked into it. The leaves it may link instead
// (vault/item for the item vocabulary, credentials/credname for a
// credential's name) are not these packages. On failure the test names the
// chain of imports that pulled one in.
func TestMcpdLinksNeitherOwnerNorVault(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-json", "./cmd/mcpd").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/mcpd: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
	}
	root := module + "/cmd/mcpd"
	if imports[root] == nil {
		t.Fatalf("go list -deps ./cmd/mcpd did not list %s", root)
	}
	for _, banned := range []string{module + "/owner", module + "/vault"} {
		if _, linked := imports[banned]; !linked {
			continue
		}
		t.Errorf("cmd/mcpd links %s through %s; mcpd reaches the owner's and the vault's state only over the control API",
			rel(banned), strings.Join(importChain(imports, root, banned), " -> "))
	}
}

// importChain is a shortest chain of direct imports from one package to
// another, by package path relative to the module, for a failure message.
func importChain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{rel(p)}, chain...)
			}
			return chain
		}
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return []string{rel(from), "?", rel(to)}
}

// forbiddenEdges are direct imports docs/DESIGN.md rules out even where the
// direction table would otherwise have to list them (issue 24: a fill is
// decided in the broker, so the proxy mechanism does not read policy or the
// control API's wire types, and the broker does not either).
var forbiddenEdges = [][2]string{
	{"intercept", "policy"},
	{"intercept", "control"},
	{"broker", "control"},
	// mcpd links tokens and policy: they name items through vault/item.
	{"tokens", "vault"},
	{"policy", "vault"},
}

// pendingEdges are forbidden edges that still exist in the tree, each with
// the issue that removes it. TestForbiddenEdges only logs them; the branch
// that removes an edge deletes its entry here and in domainImports, and the
// test fails while an entry names an edge that is already gone.
var pendingEdges = map[[2]string]string{}

// hostnameExternal are the only modules outside the standard library that
// package hostname, the one host-name normaliser, may import.
var hostnameExternal = []string{"golang.org/x/net/idna", "golang.org/x/net/publicsuffix"}

// TestDirectionTableCoversEveryPackage: every package of the module has a
// row in domainImports, so a new package (or a store, or the wiring) cannot
// pick up edges nobody decided on.
func TestDirectionTableCoversEveryPackage(t *testing.T) {
	for _, p := range listPackages(t) {
		if name := rel(p.ImportPath); domainImports[name] == nil {
			if _, ok := domainImports[name]; !ok {
				t.Errorf("package %s has no entry in the direction table; add its allowed imports to domainImports (deps_test.go) and its row to docs/DESIGN.md", name)
			}
		}
	}
}

// TestForbiddenEdges fails on an edge of forbiddenEdges in the tree unless
// pendingEdges names it, and on a pendingEdges entry whose edge is gone.
func TestForbiddenEdges(t *testing.T) {
	edges := map[[2]string]bool{}
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				edges[[2]string{rel(p.ImportPath), rel(imp)}] = true
			}
		}
	}
	for _, e := range forbiddenEdges {
		why, pending := pendingEdges[e]
		switch {
		case edges[e] && pending:
			t.Logf("pending: %s imports %s; to be removed (%s)", e[0], e[1], why)
		case edges[e]:
			t.Errorf("%s imports %s; docs/DESIGN.md forbids this edge", e[0], e[1])
		case pending:
			t.Errorf("%s no longer imports %s: delete the edge from pendingEdges and from domainImports in deps_test.go", e[0], e[1])
		}
		if !pending && slices.Contains(domainImports[e[0]], e[1]) {
			t.Errorf("domainImports allows %s -> %s, a forbidden edge; remove it from the table", e[0], e[1])
		}
	}
	for e := range pendingEdges {
		if !slices.Contains(forbiddenEdges, e) {
			t.Errorf("pendingEdges names %s -> %s, which is not in forbiddenEdges", e[0], e[1])
		}
	}
}

// TestDomainDirections enforces domainImports: who may import whom among
// the domain packages, not only who imports a heavy dependency.
func TestDomainDirections(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		allowed, ok := domainImports[name]
		if !ok {
			continue
		}
		seen[name] = true
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				if name == "hostname" && strings.Contains(strings.Split(imp, "/")[0], ".") && !slices.Contains(hostnameExternal, imp) {
					t.Errorf("edge hostname -> %s: package hostname imports only the standard library, %v and the root package", imp, hostnameExternal)
				}
				continue
			}
			if dep := rel(imp); !slices.Contains(allowed, dep) {
				t.Errorf("edge %s -> %s is not in the direction table (docs/DESIGN.md): %s may import only %v", name, dep, name, allowed)
			}
		}
	}
	for name := range domainImports {
		if !seen[name] {
			t.Errorf("package %s in the direction table does not exist; update domainImports and docs/DESIGN.md", name)
		}
	}
}
