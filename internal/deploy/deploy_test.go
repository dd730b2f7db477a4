package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveDataDirOrder(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home, _ := os.UserHomeDir()
	for _, c := range []struct {
		name            string
		flag, config    string
		env             map[string]string
		wantDir, source string
	}{
		{"flag first", "/f", "/c", map[string]string{"AGENTVAULT_DATA": "/a", "DATA": "/d"}, "/f", "--data"},
		{"AGENTVAULT_DATA over DATA", "", "/c", map[string]string{"AGENTVAULT_DATA": "/a", "DATA": "/d"}, "/a", "AGENTVAULT_DATA"},
		{"DATA over the config", "", "/c", map[string]string{"DATA": "/d"}, "/d", "DATA"},
		{"blank variables are unset", "", "/c", map[string]string{"AGENTVAULT_DATA": " ", "DATA": ""}, "/c", "config data_dir"},
		{"the default", "", "", nil, filepath.Join(home, ".agentvault"), "default"},
	} {
		got := ResolveDataDir(c.flag, c.config, env(c.env))
		if got.Dir != c.wantDir || got.Source != c.source {
			t.Errorf("%s: %+v, want %s from %s", c.name, got, c.wantDir, c.source)
		}
	}
}

// TestResolveReadsTheDataDirectorysConfig: without --config the data
// directory's proxyd.yaml names the listeners (the data directory stays
// the one it was found in); with --config its data_dir applies unless a
// flag or variable names another; without either, the embedded defaults.
func TestResolveReadsTheDataDirectorysConfig(t *testing.T) {
	none := func(string) string { return "" }
	data := t.TempDir()
	ch, err := Resolve(data, "", none)
	if err != nil || ch.ConfigPath != "" || ch.Listen.Control != "127.0.0.1:7701" || ch.Listen.MCP != "127.0.0.1:7704" || ch.Listen.Credentials != "" {
		t.Fatalf("defaults: %+v %v", ch, err)
	}
	os.WriteFile(filepath.Join(data, ConfigFile), []byte("data_dir: /elsewhere\nlisten:\n  control: 127.0.0.1:9901\n  mcp: 127.0.0.1:9904\nunknown_to_mcpd: 1\n"), 0o600)
	ch, err = Resolve(data, "", none)
	if err != nil || ch.ConfigPath != filepath.Join(data, ConfigFile) || ch.Data.Dir != data || ch.Listen.Control != "127.0.0.1:9901" ||
		ch.Listen.MCP != "127.0.0.1:9904" || ch.Listen.Proxy != "127.0.0.1:7700" {
		t.Fatalf("the data directory's config: %+v %v", ch, err)
	}
	cfg := filepath.Join(t.TempDir(), "x.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+data+"\n"), 0o600)
	ch, err = Resolve("", cfg, none)
	if err != nil || ch.Data.Dir != data || ch.Data.Source != "config data_dir" || ch.ConfigPath != cfg {
		t.Fatalf("--config: %+v %v", ch, err)
	}
	if _, err := Resolve("", filepath.Join(data, "missing.yaml"), none); err == nil {
		t.Error("a missing --config file was accepted")
	}
	os.WriteFile(cfg, []byte("listen: [\n"), 0o600)
	if _, err := Resolve("", cfg, none); err == nil {
		t.Error("bad YAML was accepted")
	}
}

// TestFindDriver: an explicit PLAYWRIGHT_DRIVER_PATH is reported as it is;
// without it, the checkout's .cache/playwright-driver under the working
// directory is found (a second terminal in the clone, issue 26).
func TestFindDriver(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == DriverEnv {
				return v
			}
			return ""
		}
	}
	if d := FindDriver(env("/nowhere")); d.Found || d.Dir != "/nowhere" || d.Source != DriverEnv {
		t.Errorf("explicit missing driver: %+v", d)
	}
	wd := t.TempDir()
	t.Chdir(wd)
	if d := FindDriver(env("")); d.Found {
		t.Errorf("found a driver in an empty tree: %+v", d)
	}
	drv := filepath.Join(wd, DriverCache)
	os.MkdirAll(filepath.Join(drv, "package"), 0o755)
	os.WriteFile(filepath.Join(drv, "package", "cli.js"), []byte("//"), 0o644)
	d := FindDriver(env(""))
	if !d.Found || d.Dir != drv || d.Source != "the working directory" {
		t.Errorf("the working directory's driver: %+v", d)
	}
}
