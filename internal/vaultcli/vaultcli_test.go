package vaultcli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

type run struct {
	code           int
	stdout, stderr string
}

func testEnv(dir, stdin string) (Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		IsTerminal:   func() bool { return false },
		ReadPassword: func(string) ([]byte, error) { return nil, errors.New("no terminal") },
		Open:         func(context.Context) (*vault.Vault, func() error, error) { return openSQLiteVault(dir) },
		KeyFile:      filepath.Join(dir, KeyFileName),
	}, &out, &errb
}

func runCLI(t *testing.T, dir, stdin string, args ...string) run {
	t.Helper()
	env, out, errb := testEnv(dir, stdin)
	code := Run(context.Background(), args, env)
	return run{code, out.String(), errb.String()}
}

// Secrets of the end-to-end test (the CVV is a short canary: leakcheck
// reads it only as a whole field).
const (
	cardNumber = "378282246310005"
	cardCVV    = "7391"
	holder     = "Grace Brewster Hopper"
	password   = "Zx9!correct-horse-battery"
	email      = "grace.hopper@navy-example.net"
	totpSeed   = "JBSWY3DPEHPK3PXP"
)

// TestCLIAddRestartListRotateNoPlaintext adds a card and a login through the
// CLI with a real SQLite file (each Run opens and closes the vault, i.e. a
// restart), lists, rotates, reads again, then greps the raw database and
// WAL files, and everything the CLI printed, for the secrets.
func TestCLIAddRestartListRotateNoPlaintext(t *testing.T) {
	dir := t.TempDir()
	var outputs []string
	do := func(stdin string, args ...string) run {
		t.Helper()
		r := runCLI(t, dir, stdin, args...)
		outputs = append(outputs, r.stdout, r.stderr)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	do(cardNumber+"\n"+cardCVV+"\n", "add-card", "--exp", "12/2030", "--holder", holder, "--sites", "shop.example.com,pay.example.net")
	added := []string{
		do(password+"\n"+totpSeed+"\n", "add-login", "--site", "github.com", "--email", email, "--username", "ghopper").stdout,
		do("", "add-identity", "--name", holder, "--email", email, "--phone", "+1 555 0100 999").stdout,
		do("", "add-address", "--line1", "77 Unique Street", "--city", "Arlington", "--postal-code", "22201", "--country", "us").stdout,
	}
	// Each add says its kind and label, a login its masked handle too, and
	// the item's id.
	for i, want := range []string{`^added login github: \S.* \(\S+\)\n$`, `^added identity \S+ \(\S+\)\n$`, `^added address \S+ \(\S+\)\n$`} {
		if !regexp.MustCompile(want).MatchString(added[i]) {
			t.Errorf("add answered %q, want %s", added[i], want)
		}
	}

	st, err := os.Stat(filepath.Join(dir, KeyFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode().Perm(), err)
	}
	keyBefore, _ := os.ReadFile(filepath.Join(dir, KeyFileName))

	list := do("", "list").stdout
	for _, want := range []string{"amex •••• 0005", "exp 12/2030", "github.com", "password ••••••••", "login    github"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	show := do("", "show", "card", "1").stdout
	for _, want := range []string{"amex •••• 0005", "cvv:         ••••", "shop.example.com, pay.example.net"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if show := do("", "show", "--org", "default", "login", "github").stdout; !strings.Contains(show, "totp:        set (SHA1, 6 digits, 30 s)") {
		t.Errorf("show lacks the TOTP line:\n%s", show)
	}

	rot := do("", "rotate-key")
	if !strings.Contains(rot.stdout, "rotated master key") {
		t.Fatalf("rotate-key said: %s", rot.stdout)
	}
	keyAfter, _ := os.ReadFile(filepath.Join(dir, KeyFileName))
	if bytes.Equal(keyBefore, keyAfter) {
		t.Fatal("rotate-key did not replace the key file")
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFileName+".old")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("old key file left behind after a complete rotation")
	}
	if list2 := do("", "list").stdout; list2 != list {
		t.Fatalf("list changed across rotation:\n%s\nvs\n%s", list, list2)
	}

	// Read the values back through the service after the restart.
	v, closeFn, err := openSQLiteVault(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	ctx := context.Background()
	card, err := v.GetByLabel(ctx, "default", vault.KindCard, "1")
	if err != nil {
		t.Fatal(err)
	}
	lg, err := v.GetByLabel(ctx, "default", vault.KindLogin, "github")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		it   vault.Item
		f    vault.Field
		want string
	}{{card, vault.FieldNumber, cardNumber}, {card, vault.FieldCVV, cardCVV}, {card, vault.FieldHolder, holder},
		{lg, vault.FieldPassword, password}, {lg, vault.FieldEmail, email}} {
		s, err := v.Release(ctx, vault.ReleaseArgs{Org: "default", ItemID: c.it.ID, Field: c.f, Destination: "test", Actor: "test"})
		if err != nil || string(s.InsecureRawBytes()) != c.want {
			t.Fatalf("%s after rotation: wrong value or %v", c.f, err)
		}
	}
	// The TOTP field releases the code of the moment (P23), never the seed;
	// the vault's clock is the real one, so either side of a step boundary.
	before, _ := vault.TOTPCode(vault.NewSecret([]byte(totpSeed)), time.Now())
	code, err := v.Release(ctx, vault.ReleaseArgs{Org: "default", ItemID: lg.ID, Field: vault.FieldTOTP, Destination: "test", Actor: "test"})
	after, _ := vault.TOTPCode(vault.NewSecret([]byte(totpSeed)), time.Now())
	if err != nil || !(code.Equal(before) || code.Equal(after)) {
		t.Fatalf("totp after rotation: not the code of the moment (%v)", err)
	}
	grepDB(t, dir, true) // while open: the WAL holds the latest pages
	closeFn()

	do("", "remove", "address", "1")
	if r := runCLI(t, dir, "", "show", "address", "1"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("show removed item: exit %d %s", r.code, r.stderr)
	}

	grepDB(t, dir, false)
	printed := leakcheck.New(leakcheck.Value("card number", cardNumber), leakcheck.Value("cvv", cardCVV),
		leakcheck.Value("password", password), leakcheck.Value("totp seed", totpSeed))
	for _, out := range outputs {
		printed.Answer(t, "the CLI's output", []byte(out))
	}
}

// grepDB greps the database, WAL and shm files for every secret and
// personal detail the end-to-end test stored.
func grepDB(t *testing.T, dir string, wantWAL bool) {
	t.Helper()
	// At rest only the long values can be looked for: a four-digit string
	// turns up by chance in a file of random ciphertext (the CVV is sealed
	// with the number, which is looked for).
	atRest := leakcheck.New(leakcheck.Value("card number", cardNumber), leakcheck.Value("holder", holder),
		leakcheck.Value("holder's first names", "Grace Brewster"), leakcheck.Value("password", password), leakcheck.Value("email", email),
		leakcheck.Value("totp seed", totpSeed), leakcheck.Value("street", "77 Unique Street"), leakcheck.Value("phone digits", "0100 999"))
	files, _ := filepath.Glob(filepath.Join(dir, DBFileName+"*"))
	if wantWAL && len(files) < 2 {
		t.Fatalf("expected the database and its WAL, got %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		atRest.Binary(t, filepath.Base(f), b)
	}
}

func TestCLIBadInputExits2AndWritesNothing(t *testing.T) {
	cases := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"no command", "", nil},
		{"unknown command", "", []string{"add-car"}},
		{"luhn", "4242424242424241\n123\n", []string{"add-card", "--exp", "12/2030", "--any-site"}},
		{"short cvv", "4242424242424242\n12\n", []string{"add-card", "--exp", "12/2030", "--any-site"}},
		{"missing cvv", "4242424242424242\n", []string{"add-card", "--exp", "12/2030", "--any-site"}},
		{"empty stdin", "", []string{"add-card", "--exp", "12/2030", "--any-site"}},
		{"no exp", "4242424242424242\n123\n", []string{"add-card", "--any-site"}},
		{"three-digit year", "4242424242424242\n123\n", []string{"add-card", "--exp", "12/030", "--any-site"}},
		{"month 13", "4242424242424242\n123\n", []string{"add-card", "--exp", "13/2030", "--any-site"}},
		{"expired", "4242424242424242\n123\n", []string{"add-card", "--exp", "01/2020", "--any-site"}},
		{"no sites", "4242424242424242\n123\n", []string{"add-card", "--exp", "12/2030"}},
		{"public suffix site", "4242424242424242\n123\n", []string{"add-card", "--exp", "12/2030", "--sites", "co.uk"}},
		{"number as flag", "", []string{"add-card", "--exp", "12/2030", "--any-site", "--number", "4242424242424242"}},
		{"password as flag", "", []string{"add-login", "--site", "a.com", "--password=hunter2"}},
		{"unknown flag", "", []string{"add-login", "--site", "a.com", "--colour", "red"}},
		{"login on com", "pw\n", []string{"add-login", "--site", "com", "--email", "a@b.com"}},
		{"login bad email", "pw\n", []string{"add-login", "--site", "a.com", "--email", "nope"}},
		{"login no password", "", []string{"add-login", "--site", "a.com", "--email", "a@b.com"}},
		{"identity no name", "", []string{"add-identity", "--email", "a@b.com"}},
		{"address no city", "", []string{"add-address", "--line1", "x", "--postal-code", "1", "--country", "DE"}},
		{"show no args", "", []string{"show"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := runCLI(t, dir, c.stdin, c.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
			}
			if r.stderr == "" {
				t.Fatal("no message")
			}
			typed := leakcheck.New(leakcheck.Value("card number", "4242424242424242"), leakcheck.Value("bad card number", "4242424242424241"),
				leakcheck.Value("password", "hunter2"))
			typed.Answer(t, "the CLI's message", []byte(r.stderr+r.stdout))
			if l := runCLI(t, dir, "", "list"); l.code != 0 || !strings.Contains(l.stdout, "no items") {
				t.Fatalf("refused input wrote something: %q", l.stdout)
			}
		})
	}
}

func TestCLITerminalPromptsWithoutReadingStdin(t *testing.T) {
	dir := t.TempDir()
	env, out, errb := testEnv(dir, "")
	env.Stdin = readerFunc(func([]byte) (int, error) { t.Fatal("stdin read on a terminal"); return 0, nil })
	env.IsTerminal = func() bool { return true }
	answers := map[string]string{"Card number: ": "4242 4242 4242 4242", "CVV: ": "123"}
	var prompts []string
	env.ReadPassword = func(p string) ([]byte, error) {
		prompts = append(prompts, p)
		return []byte(answers[p]), nil
	}
	if code := Run(context.Background(), []string{"add-card", "--exp", "12/2030", "--any-site", "--holder", "A"}, env); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Join(prompts, "|") != "Card number: |CVV: " {
		t.Fatalf("prompts %q", prompts)
	}
	if !strings.Contains(out.String(), "visa •••• 4242") {
		t.Fatalf("output %q", out.String())
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

func TestOpenSQLiteRefusesMissingKeyForExistingDB(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, dir, "", "add-identity", "--name", "A"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if err := os.Remove(filepath.Join(dir, KeyFileName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openSQLiteVault(dir); !strings.Contains(err.Error(), "sealed") {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a fresh key was created over an existing vault")
	}
}

// TestCLIInterruptedRotationRecovers simulates a crash after the new key
// file was written but before the store was re-wrapped.
func TestCLIInterruptedRotationRecovers(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, dir, password+"\n\n", "add-login", "--site", "github.com", "--username", "g"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	keyPath := filepath.Join(dir, KeyFileName)
	old, err := vault.ReadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := vault.WriteKeyFile(keyPath+".old", old); err != nil {
		t.Fatal(err)
	}
	newKey := bytes.Repeat([]byte{0x5a}, 32)
	if err := vault.WriteKeyFile(keyPath, newKey); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, dir, "", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "github") {
		t.Fatalf("list after interrupted rotation: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(keyPath + ".old"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(".old not removed after the rotation was finished")
	}
	v, closeFn, err := openSQLiteVault(dir)
	if err != nil || v.ActiveKeyID() != vault.KeyIDFor(newKey) {
		t.Fatalf("vault not on the new key: %v", err)
	}
	closeFn()
}

// TestRotateKeyWhileAnotherProcessHasTheVaultOpen: proxyd (OpenSQLite, OpenStore)
// stays open while the CLI rotates; it keeps releasing and writing.
func TestRotateKeyWhileAnotherProcessHasTheVaultOpen(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, dir, password+"\n\n", "add-login", "--site", "github.com", "--username", "g"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	v, closeFn, err := openSQLiteVault(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if r := runCLI(t, dir, "", "rotate-key"); r.code != 0 {
		t.Fatalf("rotate-key: %s", r.stderr)
	}
	ctx := context.Background()
	lg, err := v.GetByLabel(ctx, "default", vault.KindLogin, "github")
	if err != nil {
		t.Fatalf("read after rotation elsewhere: %v", err)
	}
	s, err := v.Release(ctx, vault.ReleaseArgs{Org: "default", ItemID: lg.ID, Field: vault.FieldPassword, Destination: "github.com"})
	if err != nil || string(s.InsecureRawBytes()) != password {
		t.Fatalf("release after rotation elsewhere: %v", err)
	}
	if _, err := v.AddIdentity(ctx, "default", "owner", vault.IdentityMeta{Name: "A"}); err != nil {
		t.Fatalf("write after rotation elsewhere: %v", err)
	}
}

// failingRotate is a real SQLite store whose Rotate fails, as when the disk
// fills during the re-wrap transaction.
type failingRotate struct{ vault.Store }

func (failingRotate) Rotate(context.Context, vault.RotateArgs) error {
	return errors.New("disk full")
}

func TestRotateKeyFailureKeepsTheWorkingKey(t *testing.T) {
	dir := t.TempDir()
	if r := runCLI(t, dir, password+"\n\n", "add-login", "--site", "github.com", "--username", "g"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	keyPath := filepath.Join(dir, KeyFileName)
	before, _ := os.ReadFile(keyPath)
	env, _, errb := testEnv(dir, "")
	env.Open = func(ctx context.Context) (*vault.Vault, func() error, error) {
		key, err := vault.ReadKeyFile(keyPath)
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlite.Open(filepath.Join(dir, DBFileName))
		if err != nil {
			return nil, nil, err
		}
		v, err := vault.Open(ctx, vault.Config{Store: failingRotate{st}, MasterKey: key})
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return v, st.Close, nil
	}
	if code := Run(context.Background(), []string{"rotate-key"}, env); code != 1 {
		t.Fatalf("exit %d, want 1 (%s)", code, errb.String())
	}
	after, _ := os.ReadFile(keyPath)
	if !bytes.Equal(before, after) {
		t.Fatal("a failed rotation replaced the working key file")
	}
	if _, err := os.Stat(keyPath + ".old"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(".old left behind after a cleanly failed rotation")
	}
	if r := runCLI(t, dir, "", "list"); r.code != 0 || !strings.Contains(r.stdout, "github") {
		t.Fatalf("vault unusable after a failed rotation: %s", r.stderr)
	}
}

// openSQLiteVault opens dir's SQLite store and the vault over it, as
// proxyd does on a SQLite deployment; the func closes the store.
func openSQLiteVault(dir string) (*vault.Vault, func() error, error) {
	st, err := OpenSQLite(dir)
	if err != nil {
		return nil, nil, err
	}
	v, err := OpenStore(context.Background(), dir, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return v, st.Close, nil
}
