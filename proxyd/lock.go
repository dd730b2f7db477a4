package proxyd

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/vaultcli"
)

// LockFile is the file under the data directory a running proxyd holds an
// exclusive flock(2) on; it contains that process's PID.
const LockFile = "proxyd.lock"

// errAlreadyRunning names the other instance.
func errAlreadyRunning(dataDir string, f *os.File) error {
	pid := "unknown pid"
	if b, err := os.ReadFile(f.Name()); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pid = "pid " + strconv.Itoa(n)
		}
	}
	return agentvault.Errorf(agentvault.CodeInvalidInput,
		"proxyd is already running on the data directory %s (%s); stop it first, or give this one another --data and other ports", dataDir, pid)
}

// checkNotRunning reports another proxyd holding dataDir's lock without
// writing anything: the lock file is only opened when it already exists.
func checkNotRunning(dataDir string) error {
	path := filepath.Join(dataDir, LockFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot open %s: %s", path, vaultcli.Reason(err))
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return errAlreadyRunning(dataDir, f)
		}
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot lock %s: %s", f.Name(), err)
	}
	return nil // closing f releases the probe's lock
}

// lockDataDir creates dataDir (0700) if needed and takes the exclusive
// lock, writing this process's PID into the lock file. The lock lasts as
// long as the returned file stays open (the kernel drops it when the
// process dies, so a crash leaves no stale lock).
func lockDataDir(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the data directory %s: %s", dataDir, vaultcli.Reason(err))
	}
	path := filepath.Join(dataDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create %s: %s", path, vaultcli.Reason(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errAlreadyRunning(dataDir, f)
		}
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot lock %s: %s", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// listen binds every listener before anything is written, so a busy port
// fails start-up with nothing changed on disk.
func (m *Main) listen() error {
	bind := func(name, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot listen on %s (%s): %s", addr, name, listenReason(err))
		}
		return l, nil
	}
	var err error
	if m.proxyL, err = bind("listen.proxy", m.Config.Listen.Proxy); err != nil {
		return err
	}
	if m.controlL, err = bind("listen.control", m.Config.Listen.Control); err != nil {
		return err
	}
	if m.adminL, err = bind("listen.admin", m.Config.Listen.Admin); err != nil {
		return err
	}
	if m.Config.Listen.Dashboard != "" {
		if m.dashL, err = bind("listen.dashboard", m.Config.Listen.Dashboard); err != nil {
			return err
		}
	}
	if m.Config.Listen.Credentials != "" {
		if m.credL, err = bind("listen.credentials", m.Config.Listen.Credentials); err != nil {
			return err
		}
	}
	return nil
}

// listenReason is the system's reason ("address already in use", "cannot
// assign requested address", "permission denied"), with a hint for the
// common one.
func listenReason(err error) string {
	var se *os.SyscallError
	r := err.Error()
	if errors.As(err, &se) {
		r = se.Err.Error()
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		r += " (another process holds the port: another proxyd? `ss -ltnp` names it)"
	}
	return r
}
