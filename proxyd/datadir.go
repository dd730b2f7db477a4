package proxyd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/vaultcli"
)

// Environment variables naming the data directory, in the order they are
// consulted (after a --data flag, before the config file and the default).
// DATA is what `make run DATA=...` passes; AGENTVAULT_DATA is the
// unambiguous name for everything else.
var dataEnv = []string{"AGENTVAULT_DATA", "DATA"}

// DataDirChoice is the data directory a command uses and where that choice
// came from, so an error can say where it looked and why there.
type DataDirChoice struct {
	Dir    string
	Source string // "--data", "AGENTVAULT_DATA", "DATA", "config data_dir", "default"
}

func (c DataDirChoice) String() string { return fmt.Sprintf("%s (from %s)", c.Dir, c.Source) }

// ResolveDataDir is the one data directory rule of every proxyd command: a
// --data flag anywhere on the command line, then $AGENTVAULT_DATA, then
// $DATA, then the config file's data_dir (when a config file names one),
// then the default ~/.agentvault.
func ResolveDataDir(flagValue, configValue string, getenv func(string) string) DataDirChoice {
	if getenv == nil {
		getenv = os.Getenv
	}
	if flagValue != "" {
		return DataDirChoice{expandHome(flagValue), "--data"}
	}
	for _, e := range dataEnv {
		if v := strings.TrimSpace(getenv(e)); v != "" {
			return DataDirChoice{expandHome(v), e}
		}
	}
	if configValue != "" {
		return DataDirChoice{expandHome(configValue), "config data_dir"}
	}
	return DataDirChoice{expandHome(DefaultConfig().DataDir), "default"}
}

// commonFlags are the flags every command takes at any position: --data DIR
// (or --data=DIR, -data) and --init. Parsing stops at "--".
type commonFlags struct {
	data string
	init bool
}

func peelCommon(args []string) (commonFlags, []string, error) {
	var f commonFlags
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return f, append(rest, args[i:]...), nil
		case a == "--data" || a == "-data":
			if i+1 >= len(args) {
				return f, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "--data needs a directory")
			}
			f.data = args[i+1]
			i++
		case strings.HasPrefix(a, "--data=") || strings.HasPrefix(a, "-data="):
			f.data = a[strings.IndexByte(a, '=')+1:]
		case a == "--init" || a == "-init":
			f.init = true
		default:
			rest = append(rest, a)
		}
	}
	return f, rest, nil
}

// requireVault refuses to go on when the chosen data directory holds no
// vault, unless init is set (then it creates one: master key and
// database, so a later `proxyd run` finds both). Forgetting --data must
// never silently create a second, empty vault the running proxyd does not
// see.
func requireVault(d DataDirChoice, init bool) error {
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
		v, st, err := vaultcli.Open(context.Background(), d.Dir)
		if err != nil {
			return err
		}
		_ = v
		return st.Close()
	}
	return agentvault.Errorf(agentvault.CodeInternal, "cannot read %s: %s", db, vaultcli.Reason(err))
}
