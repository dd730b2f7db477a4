package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	buildOnce sync.Map // binary name -> *buildResult
	builtDirs sync.Map // temporary directories to remove after the run
)

func TestMain(m *testing.M) {
	code := m.Run()
	builtDirs.Range(func(k, _ any) bool {
		_ = os.RemoveAll(k.(string))
		return true
	})
	os.Exit(code)
}

type buildResult struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildCmd builds ./cmd/<name> once per test binary into a temporary
// directory that outlives individual tests.
func buildCmd(t *testing.T, name string) string {
	t.Helper()
	v, _ := buildOnce.LoadOrStore(name, &buildResult{})
	br := v.(*buildResult)
	br.once.Do(func() {
		dir, err := os.MkdirTemp("", "agentvault-e2e-bin-")
		if err != nil {
			br.err = err
			return
		}
		builtDirs.Store(dir, true)
		br.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", br.path, "./cmd/"+name)
		cmd.Dir = repoRoot()
		br.out, br.err = cmd.CombinedOutput()
	})
	if br.err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, br.err, br.out)
	}
	return br.path
}

// mcpAgent is the scripted agent: an MCP client speaking to the built mcpd
// over stdio. Every answer it gets is kept for the P11 sweep.
type mcpAgent struct {
	t    *testing.T
	cs   *mcp.ClientSession
	logs *syncBuffer // mcpd's stderr: its log
	// transcript holds every result, as JSON and as decoded text and image
	// bytes, for the leak sweep.
	transcript answers
	images     [][]byte

	mu      sync.Mutex
	latency map[string][]time.Duration
}

func startAgent(t *testing.T, bin string, args, env []string) *mcpAgent {
	t.Helper()
	a := &mcpAgent{t: t, logs: &syncBuffer{}, latency: map[string][]time.Duration{}}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = a.logs
	client := mcp.NewClient(&mcp.Implementation{Name: "agentvault-e2e-agent", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to mcpd: %v (stderr has %d bytes)", err, len(a.logs.Bytes()))
	}
	a.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return a
}

// toolNames lists the tools mcpd offers.
func (a *mcpAgent) toolNames() []string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.cs.ListTools(ctx, nil)
	if err != nil {
		a.t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	return names
}

// answer is one tool result as the agent reads it.
type answer struct {
	text  string // content[0] and later text blocks, joined by newlines
	isErr bool
	res   *mcp.CallToolResult
}

var codeRe = regexp.MustCompile(`(?:code=|"code":\s*")([a-z_]+)`)

// code is the refusal code of the answer's status line or JSON keys.
func (r answer) code() string {
	if m := codeRe.FindStringSubmatch(r.text); m != nil {
		return m[1]
	}
	return ""
}

// status is the first line of a prose answer.
func (r answer) status() string {
	line, _, _ := strings.Cut(r.text, "\n")
	if len(line) > 160 {
		line = line[:160]
	}
	return leakcheck.Redact(line)
}

// json decodes a JSON answer.
func (r answer) json(t *testing.T) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(r.text), &out); err != nil {
		t.Fatalf("answer is not a JSON object (%d bytes): %v; status %q", len(r.text), err, r.status())
	}
	return out
}

// call invokes a tool. A transport error fails the test; a tool error is an
// answer with isErr set.
func (a *mcpAgent) call(name string, args map[string]any) answer {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	d := time.Since(start)
	if err != nil {
		a.t.Fatalf("%s: protocol error: %v", name, err)
	}
	a.mu.Lock()
	a.latency[name] = append(a.latency[name], d)
	a.mu.Unlock()
	raw, _ := json.Marshal(res)
	a.transcript.Write(raw)
	a.transcript.Write([]byte("\n"))
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			a.images = append(a.images, c.Data)
			a.transcript.Write([]byte(base64.StdEncoding.EncodeToString(c.Data)))
		}
	}
	if res.StructuredContent != nil {
		sc, _ := json.Marshal(res.StructuredContent)
		a.transcript.Write(sc)
	}
	text := strings.Join(parts, "\n")
	a.transcript.Write([]byte(text + "\n"))
	return answer{text: text, isErr: res.IsError, res: res}
}

// must calls a tool that has to succeed.
func (a *mcpAgent) must(name string, args map[string]any) answer {
	a.t.Helper()
	r := a.call(name, args)
	if r.isErr {
		a.t.Fatalf("%s refused: %q", name, r.status())
	}
	return r
}

// refused calls a tool that has to be refused with code.
func (a *mcpAgent) refused(name string, args map[string]any, code string) answer {
	a.t.Helper()
	r := a.call(name, args)
	if !r.isErr || r.code() != code {
		a.t.Errorf("%s: want a refusal with code %s, got isError=%v status %q", name, code, r.isErr, r.status())
	}
	return r
}

func (a *mcpAgent) latencyReport() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for n := range a.latency {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		ds := a.latency[n]
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		b.WriteString(n + "=" + (sum / time.Duration(len(ds))).Round(time.Millisecond).String() + "x" + itoa(len(ds)) + " ")
	}
	return b.String()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// catalogTokens finds the mock tokens in a catalog answer by their grammar,
// so the script does not depend on the catalog's nesting.
var tokenRe = regexp.MustCompile(`av_[a-z]+_[a-z0-9-]+_[a-z0-9_]+?_[a-z0-9]{5}\b`)

func findToken(catalog, kind, field string) string {
	for _, tok := range tokenRe.FindAllString(catalog, -1) {
		if strings.HasPrefix(tok, "av_"+kind+"_") && strings.Contains(tok, "_"+field+"_") {
			return tok
		}
	}
	return ""
}

// close ends the MCP session so mcpd flushes and exits.
func (a *mcpAgent) close() { _ = a.cs.Close() }
