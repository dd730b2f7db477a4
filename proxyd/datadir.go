package proxyd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/store/postgres"
)

// DataDirChoice is the data directory a command uses and where that choice
// came from (package deploy holds the rule, for both daemons).
type DataDirChoice = deploy.DataDir

// ResolveDataDir is the one data directory rule of every proxyd command,
// and of mcpd: deploy.ResolveDataDir.
func ResolveDataDir(flagValue, configValue string, getenv func(string) string) DataDirChoice {
	return deploy.ResolveDataDir(flagValue, configValue, getenv)
}

// commonFlags are the flags every command takes at any position: --data DIR
// (or --data=DIR, -data), --config FILE (the same forms) and --init.
// Parsing stops at "--".
type commonFlags struct {
	data   string
	config string
	init   bool
}

func peelCommon(args []string) (commonFlags, []string, error) {
	var f commonFlags
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		var dst *string
		what := "file"
		switch name {
		case "-data", "data":
			dst, what = &f.data, "directory"
		case "-config", "config":
			dst = &f.config
		}
		switch {
		case a == "--":
			return f, append(rest, args[i:]...), nil
		case !strings.HasPrefix(a, "-"):
			rest = append(rest, a)
		case dst != nil && hasValue:
			*dst = value
		case dst != nil:
			if i+1 >= len(args) {
				return f, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "%s needs a %s", a, what)
			}
			*dst = args[i+1]
			i++
		case a == "--init" || a == "-init":
			f.init = true
		default:
			rest = append(rest, a)
		}
	}
	return f, rest, nil
}

// ConfigFile is the config a data directory may hold: without --config,
// every command reads it when it is there (resolveConfig).
const ConfigFile = deploy.ConfigFile

// configChoice is the config a command runs with, the file it came from
// and the data directory.
type configChoice struct {
	Config Config
	// Path is the config file ("" for the embedded defaults).
	Path string
	Data DataDirChoice
}

// from names where the config came from, for messages.
func (c configChoice) from() string {
	if c.Path == "" {
		return "the embedded defaults"
	}
	return c.Path
}

// resolveConfig is the config of every proxyd command (run, doctor,
// data-dir, and every command that reads or writes the owner's or the
// vault's state): the file deploy.Resolve chooses (the one rule mcpd
// follows too), loaded strictly over the embedded defaults, with the data
// directory it chose. The config is validated.
func resolveConfig(common commonFlags) (configChoice, error) {
	ch, err := deploy.Resolve(common.data, common.config, nil)
	if err != nil {
		return configChoice{}, err
	}
	if ch.ConfigPath == "" {
		c := DefaultConfig()
		c.DataDir = ch.Data.Dir
		return configChoice{c, "", ch.Data}, c.Validate()
	}
	c, err := LoadConfig(ch.ConfigPath)
	if err != nil {
		return configChoice{}, err
	}
	c.DataDir = ch.Data.Dir
	return configChoice{c, ch.ConfigPath, ch.Data}, nil
}

// requireVault runs before a command that reads or writes the owner's or
// the vault's state (needVault: one that opens the vault, not only the
// owner's records). On SQLite it refuses to go on when the data directory
// holds no vault.db, unless init is set (then it creates the vault: master
// key and database, so a later `proxyd run` finds both): forgetting --data
// must never silently create a second, empty vault the running proxyd does
// not see. On Postgres --init is refused (it could only make a local
// vault no replica reads), and a command that opens the vault needs the
// deployment's master.key in the data directory; nothing is created.
func requireVault(ctx context.Context, cc configChoice, s *cliStore, init, needVault bool) error {
	d := cc.Data
	if cc.Config.Store.Driver == "postgres" {
		name := postgres.Describe(cc.Config.Store.DSN)
		if init {
			return agentvault.Errorf(agentvault.CodeInvalidInput,
				"the store is Postgres (%s, store.driver in %s): --init would only make a local SQLite vault that no replica reads; leave --init out, and run the command with a replica's config (--config FILE) or data directory (--data DIR)",
				name, cc.from())
		}
		key := filepath.Join(d.Dir, vaultcli.KeyFileName)
		if _, err := os.Stat(key); needVault && err != nil {
			return agentvault.Errorf(agentvault.CodeNotFound,
				"no master key at %s (the data directory came from %s; the store is the %s named in %s): run the command on a replica's data directory (--data DIR), or copy master.key there from one (mode 0600); a new deployment's first replica creates it at its first start",
				key, d.Source, name, cc.from())
		}
		return nil
	}
	db := filepath.Join(d.Dir, vaultcli.DBFileName)
	_, err := os.Stat(db)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist) && !init:
		return agentvault.Errorf(agentvault.CodeNotFound,
			"no vault at %s (looked for %s; the data directory came from %s): pass --data DIR (or set AGENTVAULT_DATA) to use the running appliance's, or --init to create a new vault there",
			d.Dir, db, d.Source)
	case errors.Is(err, fs.ErrNotExist):
		_, err := s.vault(ctx)
		return err
	}
	return agentvault.Errorf(agentvault.CodeInternal, "cannot read %s: %s", db, vaultcli.Reason(err))
}
