package storetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/vault"
)

// kill9Env carries the store's location to the child process.
const kill9Env = "AGENTVAULT_STORETEST_KILL9_AT"

// Kill9 proves P12 and P22 for a store's audit under group commit: the
// test binary re-runs the calling test as a child that releases a card
// from 32 goroutines through a vault on the store, printing each release's
// session once Release returned; the parent kills it with SIGKILL at a
// random point, reopens the store, and every printed release must have
// its audit record. The calling test must be a top-level test that calls
// Kill9 first; location makes a new store location (called in the parent
// only), open opens the store at one.
func Kill9(t *testing.T, location func() string, open func(location string) (vault.Store, error)) {
	if loc := os.Getenv(kill9Env); loc != "" {
		kill9Child(loc, open)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	loc := location()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), kill9Env+"="+loc)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		_ = cmd.Wait()
		t.Fatalf("child did not start: %s", stderr.String())
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(400))
	var printed []string
	for want := 100 + int(n.Int64()); len(printed) < want && sc.Scan(); {
		printed = append(printed, sc.Text())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // lines written before the kill
		printed = append(printed, sc.Text())
	}
	_ = cmd.Wait()
	if len(printed) < 100 {
		t.Fatalf("child printed %d releases: %s", len(printed), stderr.String())
	}
	st, err := open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), vault.AuditFilter{Action: vault.AuditRelease})
	if err != nil {
		t.Fatal(err)
	}
	audited := map[string]bool{}
	for _, r := range recs {
		audited[r.Session] = true
	}
	for _, s := range printed {
		if !audited[s] {
			t.Fatalf("release %s returned to its caller but its audit record is lost after SIGKILL (%d printed, %d audited)", s, len(printed), len(recs))
		}
	}
	t.Logf("%d releases returned before SIGKILL, all audited (%d audit records)", len(printed), len(recs))
}

func kill9Child(loc string, open func(string) (vault.Store, error)) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	st, err := open(loc)
	if err != nil {
		fail(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key})
	if err != nil {
		fail(err)
	}
	c, err := v.AddCard(ctx, "o", "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(strings.Repeat("4242", 4))), CVV: vault.NewSecret([]byte("123")),
		ExpiryMonth: 12, ExpiryYear: 2030, AnySite: true})
	if err != nil {
		fail(err)
	}
	fmt.Println("ready")
	for g := range 32 {
		go func() {
			for i := 0; ; i++ {
				sess := fmt.Sprintf("s_%d_%d", g, i)
				s, err := v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber,
					Destination: "shop.example.com", Session: sess, Actor: "kill9", Purpose: "substitution"})
				if err != nil {
					fail(err)
				}
				s.Wipe()
				fmt.Println(sess)
			}
		}()
	}
	select {}
}
