// Package deploy is where one deployment's pieces are, for both daemons:
// the one data-directory rule (--data, $AGENTVAULT_DATA, $DATA, the
// config's data_dir, ~/.agentvault), the one rule for which config file
// applies (--config, else the data directory's proxyd.yaml, else the
// embedded defaults), the names of the files proxyd keeps there, the
// listener addresses every process of the deployment reads from that
// config, and where the playwright driver of an install is.
//
// proxyd and mcpd both call it, so they never disagree on a directory or
// a port. It imports nothing of the owner's or the vault's side (mcpd
// links it), and it never validates a config: proxyd loads the same file
// strictly before anything listens.
package deploy

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentvault/agentvault"
	"gopkg.in/yaml.v3"
)

// Files under the data directory that more than one process reads.
const (
	// ConfigFile is the config a data directory may hold: without
	// --config, every command of both daemons reads it when it is there.
	ConfigFile       = "proxyd.yaml"
	APIKeyFile       = "api-key"
	ControlTokenFile = "control-token"
	CAFile           = "ca.pem"
)

// DefaultsYAML is the embedded default config: what proxyd runs with when
// no config file is given, and what every key a file leaves out keeps.
//
//go:embed defaults.yaml
var DefaultsYAML []byte

// DataEnv are the environment variables naming the data directory, in the
// order they are consulted (after a --data flag, before the config file
// and the default). DATA is what `make run DATA=...` passes;
// AGENTVAULT_DATA is the unambiguous name for everything else.
var DataEnv = []string{"AGENTVAULT_DATA", "DATA"}

// DataDir is the data directory a command uses and where that choice came
// from, so an error can say where it looked and why there.
type DataDir struct {
	Dir    string
	Source string // "--data", "AGENTVAULT_DATA", "DATA", "config data_dir", "default"
}

func (c DataDir) String() string { return fmt.Sprintf("%s (from %s)", c.Dir, c.Source) }

// ResolveDataDir is the one data-directory rule of both daemons: a --data
// flag, then $AGENTVAULT_DATA, then $DATA, then the config file's data_dir
// (when a config file names one), then the default ~/.agentvault.
func ResolveDataDir(flagValue, configValue string, getenv func(string) string) DataDir {
	if getenv == nil {
		getenv = os.Getenv
	}
	if flagValue != "" {
		return DataDir{ExpandHome(flagValue), "--data"}
	}
	for _, e := range DataEnv {
		if v := strings.TrimSpace(getenv(e)); v != "" {
			return DataDir{ExpandHome(v), e}
		}
	}
	if configValue != "" {
		return DataDir{ExpandHome(configValue), "config data_dir"}
	}
	return DataDir{ExpandHome(defaults().DataDir), "default"}
}

// Listen is the config's listen section as every process of a deployment
// reads it: proxyd's listeners, and mcpd's (mcp, mcp_metrics), so one file
// moves them all. proxyd's own Config holds the same keys and validates
// them (a test keeps the two key sets equal).
type Listen struct {
	Proxy string `yaml:"proxy"`
	// The proxy listener facing a network and its TLS: proxyd's alone
	// (mcpd takes the proxy URL each session hands it).
	ProxyNetwork  bool     `yaml:"proxy_network"`
	ProxyTLS      bool     `yaml:"proxy_tls"`
	ProxyNames    []string `yaml:"proxy_names"`
	ProxyCertFile string   `yaml:"proxy_cert_file"`
	ProxyKeyFile  string   `yaml:"proxy_key_file"`
	Control       string   `yaml:"control"`
	ControlTLS    bool     `yaml:"control_tls"`
	ControlNames  []string `yaml:"control_names"`
	Admin         string   `yaml:"admin"`
	Dashboard     string   `yaml:"dashboard"`
	Credentials   string   `yaml:"credentials"`
	MCP           string   `yaml:"mcp"`
	MCPMetrics    string   `yaml:"mcp_metrics"`
}

// Location is what a config says about where things are.
type Location struct {
	DataDir string `yaml:"data_dir"`
	Listen  Listen `yaml:"listen"`
}

// Choice is the deployment a command works on: its data directory, the
// config file that applies ("" for the embedded defaults) and what that
// config says about where things are.
type Choice struct {
	Data       DataDir
	ConfigPath string
	Location
}

// From names where the config came from, for messages.
func (c Choice) From() string {
	if c.ConfigPath == "" {
		return "the embedded defaults"
	}
	return c.ConfigPath
}

// Resolve is the one config rule of both daemons: the --config file; else
// the data directory's own proxyd.yaml when there is one (the data
// directory is then the one it was found in: it was chosen before the file
// was read); else the embedded defaults. The data directory follows
// ResolveDataDir. The file is read leniently here (proxyd loads it
// strictly); an unreadable file or bad YAML is an error.
func Resolve(dataFlag, configFlag string, getenv func(string) string) (Choice, error) {
	if configFlag != "" {
		loc, err := ReadLocation(configFlag)
		if err != nil {
			return Choice{}, err
		}
		d := ResolveDataDir(dataFlag, loc.DataDir, getenv)
		loc.DataDir = d.Dir
		return Choice{d, configFlag, loc}, nil
	}
	d := ResolveDataDir(dataFlag, "", getenv)
	p := filepath.Join(d.Dir, ConfigFile)
	if _, err := os.Stat(p); err != nil {
		// No directory there (yet, or a file in the way) is no config:
		// the command says what is wrong with the directory itself.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return Choice{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the data directory's config %s: %s", p, reason(err))
		}
		loc := defaults()
		loc.DataDir = d.Dir
		return Choice{d, "", loc}, nil
	}
	loc, err := ReadLocation(p)
	if err != nil {
		return Choice{}, err
	}
	loc.DataDir = d.Dir
	return Choice{d, p, loc}, nil
}

// ReadLocation reads data_dir and listen from a config file over the
// embedded defaults, ignoring every other key.
func ReadLocation(path string) (Location, error) {
	f, err := os.Open(path)
	if err != nil {
		return Location{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read config file %s: %s", path, reason(err))
	}
	defer f.Close()
	loc := defaults()
	if err := yaml.NewDecoder(f).Decode(&loc); err != nil && !errors.Is(err, io.EOF) {
		return Location{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return loc, nil
}

// defaults is the embedded config's Location.
func defaults() Location {
	var loc Location
	if err := yaml.NewDecoder(bytes.NewReader(DefaultsYAML)).Decode(&loc); err != nil {
		panic("embedded defaults do not parse: " + err.Error())
	}
	return loc
}

// Defaults is the embedded config's Location (data_dir unexpanded).
func Defaults() Location { return defaults() }

// ExpandHome turns a leading ~ into the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// reason is the operating system's reason without the path.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// DriverEnv names the playwright driver directory explicitly; DriverCache
// is where `make driver` puts it in a checkout.
const (
	DriverEnv   = "PLAYWRIGHT_DRIVER_PATH"
	DriverCache = ".cache/playwright-driver"
)

// Driver is where the playwright driver is, and how it was found.
type Driver struct {
	Dir    string
	Source string // DriverEnv, "next to the executable", "the working directory"
	Found  bool   // Dir holds package/cli.js
	// Tried lists the directories looked at, for a message when none has it.
	Tried []string
}

// FindDriver finds the install's playwright driver: $PLAYWRIGHT_DRIVER_PATH
// when set (reported as it is, found or not: an explicit setting is never
// second-guessed), else .cache/playwright-driver in the checkout the
// running executable was built into (bin/'s parent, or its own
// directory), else in the working directory.
func FindDriver(getenv func(string) string) Driver {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv(DriverEnv); d != "" {
		return Driver{Dir: d, Source: DriverEnv, Found: hasDriver(d), Tried: []string{d}}
	}
	var tried []string
	look := func(base, source string) (Driver, bool) {
		d := filepath.Join(base, DriverCache)
		for _, t := range tried {
			if t == d {
				return Driver{}, false
			}
		}
		tried = append(tried, d)
		if hasDriver(d) {
			return Driver{Dir: d, Source: source, Found: true}, true
		}
		return Driver{}, false
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		for _, base := range []string{filepath.Dir(dir), dir} {
			if d, ok := look(base, "next to the executable"); ok {
				d.Tried = tried
				return d
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if d, ok := look(wd, "the working directory"); ok {
			d.Tried = tried
			return d
		}
	}
	return Driver{Tried: tried}
}

func hasDriver(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "package", "cli.js"))
	return err == nil
}
