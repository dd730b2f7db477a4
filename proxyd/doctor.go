package proxyd

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/vault"
)

// doctor collects findings: each check says ok, or what is wrong and how
// to fix it.
type doctor struct {
	out      io.Writer
	problems int
}

func (d *doctor) ok(what string, a ...any) { fmt.Fprintf(d.out, "ok    "+what+"\n", a...) }

func (d *doctor) fail(what, fix string, a ...any) {
	d.problems++
	fmt.Fprintf(d.out, "FAIL  "+what+"\n      fix: %s\n", append(a, fix)...)
}

func (d *doctor) warn(what string, a ...any) { fmt.Fprintf(d.out, "warn  "+what+"\n", a...) }

// cmdDoctor checks a deployment as `proxyd run` with the same flags would
// use it, without changing anything, and exits 1 when something is wrong.
func cmdDoctor(ctx context.Context, args []string, common commonFlags, stdout, stderr io.Writer) int {
	cc, code, ok := runConfigFrom(args, common, stdout, stderr)
	if !ok {
		return code
	}
	d := &doctor{out: stdout}
	fmt.Fprintf(stdout, "agentvault doctor: data directory %s, config %s\n", cc.Data, cc.from())
	d.checkDeployment(ctx, cc.Config)
	if d.problems > 0 {
		fmt.Fprintf(stdout, "\n%d problem(s) found.\n", d.problems)
		return 1
	}
	fmt.Fprintln(stdout, "\nall checks passed.")
	return 0
}

func (d *doctor) checkDeployment(ctx context.Context, cfg Config) {
	dir := cfg.DataDir
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.fail("data directory %s does not exist", "start proxyd once (`make run` or `proxyd run --data DIR`), or pass the right --data", dir)
		d.checkPorts(cfg, 0)
		d.checkBrowser()
		return
	case err != nil:
		d.fail("data directory %s: %s", "check the path and its parents' permissions", dir, vaultcli.Reason(err))
		return
	case !st.IsDir():
		d.fail("%s is not a directory", "point --data at a directory", dir)
		return
	case st.Mode().Perm()&0o077 != 0:
		d.fail("data directory %s is mode %04o: other users can list it", "chmod 700 "+dir, dir, st.Mode().Perm())
	default:
		d.ok("data directory %s (mode %04o)", dir, st.Mode().Perm())
	}
	for _, name := range []string{vaultcli.KeyFileName, APIKeyFile, ControlTokenFile} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.fail("%s is missing", "start proxyd once on this data directory; it creates it", p)
		case err != nil:
			d.fail("%s: %s", "check its permissions", p, vaultcli.Reason(err))
		case st.Mode().Perm()&0o077 != 0:
			d.fail("%s is mode %04o: readable by other users", "chmod 600 "+p, p, st.Mode().Perm())
		default:
			if f, err := os.Open(p); err != nil {
				d.fail("%s cannot be read: %s", "run as the user that owns it", p, vaultcli.Reason(err))
			} else {
				f.Close()
				d.ok("%s (mode %04o)", p, st.Mode().Perm())
			}
		}
	}
	pid := d.checkStore(ctx, cfg)
	d.checkPorts(cfg, pid)
	d.checkBrowser()
}

// checkStore checks the store the config names (vault.db in the data
// directory, or Postgres: reachable, durable, migrated), then opens it as
// `proxyd run` does (openStore; nothing is created: the files exist and
// the schema is current) and checks the key, the CA and the owner account.
// It returns the running instance's pid from the lock file, or 0.
func (d *doctor) checkStore(ctx context.Context, cfg Config) int {
	dir := cfg.DataDir
	store := filepath.Join(dir, vaultcli.DBFileName)
	if cfg.Store.Driver == "postgres" {
		store = postgres.Describe(cfg.Store.DSN)
		if !d.checkPostgres(ctx, cfg.Store.DSN) {
			return lockPID(dir)
		}
	} else if _, err := os.Stat(store); err != nil {
		d.fail("%s: %s", "start proxyd once on this data directory", store, vaultcli.Reason(err))
		return 0
	}
	if _, err := vault.ReadKeyFile(filepath.Join(dir, vaultcli.KeyFileName)); err != nil {
		return lockPID(dir) // reported above
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		d.fail("the store does not open: %s", "see the reason; `proxyd run` with this config would refuse the same way", errMessage(err))
		return lockPID(dir)
	}
	defer st.Close()
	v, err := vaultcli.OpenStore(ctx, dir, st)
	if err != nil {
		d.fail("the vault does not open: %s", "a master.key that does not belong to "+store+"? restore the deployment's key file", errMessage(err))
		return lockPID(dir)
	}
	d.ok("vault in %s opens with %s", store, filepath.Join(dir, vaultcli.KeyFileName))
	blob, err := v.OpenBlob(ctx, intercept.CABlobName)
	caPath := filepath.Join(dir, CAFile)
	if err != nil {
		d.fail("the MITM CA is not in the vault: %s", "start proxyd once; it creates the CA", errMessage(err))
	} else if onDisk, err := os.ReadFile(caPath); err != nil {
		d.fail("%s: %s", "start proxyd; it writes the CA certificate there", caPath, vaultcli.Reason(err))
	} else if b, _ := pem.Decode(blob); b == nil || !bytes.Contains(onDisk, pem.EncodeToMemory(b)) {
		d.fail("%s is not the vault's CA", "restart proxyd to rewrite it, and re-import it where you trusted the old one", caPath)
	} else {
		d.ok("MITM CA %s matches the vault", caPath)
	}
	svc, err := owner.New(owner.Config{Store: st, Org: DefaultOrg})
	if err == nil {
		if has, err := svc.HasOwner(ctx); err != nil || !has {
			d.fail("no dashboard password is set", "proxyd owner set-password --email you@example.com --data "+dir)
		} else {
			d.ok("dashboard password is set")
		}
	}
	return lockPID(dir)
}

// checkPostgres checks a Postgres store without changing it: reachable,
// fsync and synchronous_commit as the store requires (docs/replicas.md),
// and every migration of this proxyd applied. It reports true when the
// store can be opened without a migration.
func (d *doctor) checkPostgres(ctx context.Context, dsn string) bool {
	name := postgres.Describe(dsn)
	ctx, cancel := context.WithTimeout(ctx, cliOpenTimeout)
	defer cancel()
	h, err := postgres.Inspect(ctx, dsn)
	if err != nil {
		d.fail("%s: %s", "check store.dsn, that Postgres runs and lets this host and role in (pg_hba.conf), and the password in PGPASSFILE or PGPASSWORD", name, errMessage(err))
		return false
	}
	d.ok("%s is reachable (PostgreSQL %s)", name, h.ServerVersion)
	ok := true
	if err := h.Durable(); err != nil {
		d.fail("%s runs with fsync %s and synchronous_commit %s: proxyd refuses it", "set fsync = on and synchronous_commit = on (remote_apply with a synchronous standby) in postgresql.conf and reload Postgres (docs/replicas.md)",
			name, h.Fsync, h.SynchronousCommit)
		ok = false
	} else {
		d.ok("%s: fsync %s, synchronous_commit %s", name, h.Fsync, h.SynchronousCommit)
	}
	switch latest := postgres.LatestSchemaVersion(); {
	case h.SchemaVersion == latest:
		d.ok("%s: migrations current (schema version %d)", name, latest)
	case h.SchemaVersion == 0:
		d.fail("%s holds no agentvault schema", "start the first replica on it (proxyd run with this config): it creates the schema, the master key and the CA", name)
		ok = false
	case h.SchemaVersion < latest:
		d.fail("%s is at schema version %d; this proxyd needs %d", "start proxyd with this config once: it applies the migrations (under a lock: replicas starting together apply each once)", name, h.SchemaVersion, latest)
		ok = false
	default:
		d.fail("%s is at schema version %d, newer than this proxyd (%d)", "run the proxyd version the other replicas run", name, h.SchemaVersion, latest)
		ok = false
	}
	return ok
}

func errMessage(err error) string { return agentvault.ErrorMessage(err) }

// lockPID is the pid of the proxyd holding dir's lock, or 0.
func lockPID(dir string) int {
	if err := checkNotRunning(dir); err == nil {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil {
		return 0
	}
	var pid int
	_, _ = fmt.Sscanf(string(b), "%d", &pid)
	return pid
}

// checkPorts: each listener is free (proxyd not running) or held by the
// proxyd running on this data directory (its /healthz names the pid).
func (d *doctor) checkPorts(cfg Config, pid int) {
	holder := 0
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	if res, err := hc.Get("http://" + cfg.Listen.Admin + "/healthz"); err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		_, _ = fmt.Sscanf(strings.TrimSpace(string(b)), "ok pid=%d", &holder)
	}
	for _, l := range []struct{ name, addr string }{
		{"listen.proxy", cfg.Listen.Proxy}, {"listen.control", cfg.Listen.Control},
		{"listen.admin", cfg.Listen.Admin}, {"listen.dashboard", cfg.Listen.Dashboard},
		{"listen.credentials", cfg.Listen.Credentials},
	} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		switch {
		case err == nil:
			ln.Close()
			if pid != 0 {
				d.fail("%s %s is free although proxyd (pid %d) runs on this data directory", "check that proxyd was started with this config", l.name, l.addr, pid)
			} else {
				d.ok("%s %s is free (proxyd is not running)", l.name, l.addr)
			}
		case pid != 0 && holder == pid:
			d.ok("%s %s is held by this data directory's proxyd (pid %d)", l.name, l.addr, pid)
		default:
			d.fail("%s %s is taken by another process (%s)", "stop it (`ss -ltnp` names it) or choose another address in the config", l.name, l.addr, listenReason(err))
		}
	}
}

func (d *doctor) checkBrowser() {
	chromium := os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if st, err := os.Stat(chromium); err != nil || st.Mode()&0o111 == 0 {
		d.fail("Chromium not found at %s", "apt-get install chromium (make deps), or set CHROMIUM_PATH", chromium)
	} else {
		d.ok("Chromium %s", chromium)
	}
	switch drv := deploy.FindDriver(nil); {
	case drv.Found:
		d.ok("playwright driver %s (%s)", drv.Dir, drv.Source)
	case drv.Source == deploy.DriverEnv:
		d.fail("no playwright driver in %s (%s)", "make driver creates one in .cache/playwright-driver; point "+deploy.DriverEnv+" there or unset it", drv.Dir, deploy.DriverEnv)
	default:
		d.fail("no playwright driver found (looked in %s)", "make driver (it puts one in .cache/playwright-driver of the checkout), or set "+deploy.DriverEnv, strings.Join(drv.Tried, ", "))
	}
	if _, err := exec.LookPath("node"); err != nil && os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		d.fail("node is not installed (the playwright driver needs it)", "apt-get install nodejs (make deps)")
	}
}
