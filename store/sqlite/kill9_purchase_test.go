package sqlite_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

const purchaseKill9Env = "AGENTVAULT_SQLITE_PURCHASE_KILL9_AT"

// TestP22_PurchaseLoadKill9LosesNothing: 32 buyers each reserve a purchase
// in the ledger and then release the card (an audit record), the way an
// authorize and its release do, in a child process killed with SIGKILL at a
// random point. Reservations and audit records share the file's group
// commits; after the kill every reservation and every release that
// returned to its caller is in the file (P12, P18, P22).
func TestP22_PurchaseLoadKill9LosesNothing(t *testing.T) {
	if loc := os.Getenv(purchaseKill9Env); loc != "" {
		purchaseKill9Child(loc)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	loc := filepath.Join(t.TempDir(), "vault.db")
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), purchaseKill9Env+"="+loc)
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
	for want := 200 + int(n.Int64()); len(printed) < want && sc.Scan(); {
		printed = append(printed, sc.Text())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // lines written before the kill
		printed = append(printed, sc.Text())
	}
	_ = cmd.Wait()
	st, err := sqlite.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	recs, err := st.QueryAudit(ctx, vault.AuditFilter{Action: vault.AuditRelease})
	if err != nil {
		t.Fatal(err)
	}
	audited := map[string]bool{}
	for _, r := range recs {
		audited[r.Session] = true
	}
	var reserved, released int
	for _, line := range printed {
		kind, id, _ := strings.Cut(line, " ")
		switch kind {
		case "reserved":
			reserved++
			if _, err := st.GetReservation(ctx, id); err != nil {
				t.Fatalf("reservation %s returned to its caller but is lost after SIGKILL: %v", id, err)
			}
		case "released":
			released++
			if !audited[id] {
				t.Fatalf("release %s returned to its caller but its audit record is lost after SIGKILL", id)
			}
		default:
			t.Fatalf("child printed %q: %s", line, stderr.String())
		}
	}
	if reserved < 50 || released < 50 {
		t.Fatalf("child returned %d reservations and %d releases before the kill: %s", reserved, released, stderr.String())
	}
	t.Logf("%d reservations and %d releases returned before SIGKILL, all on disk (%d audit records)", reserved, released, len(recs))
}

func purchaseKill9Child(loc string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "purchase kill9 child:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	st, err := sqlite.Open(loc)
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
				err := st.Reserve(ctx, policy.Reservation{ID: sess, CardID: c.ID, Day: "2026-12-02", Month: "2026-12",
					Amount: policy.Amount{Minor: 4200, Currency: "USD"}})
				if err != nil {
					fail(err)
				}
				fmt.Println("reserved", sess)
				s, err := v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber,
					Destination: "shop.example.com", Session: sess, Actor: "kill9", Purpose: "substitution"})
				if err != nil {
					fail(err)
				}
				s.Wipe()
				fmt.Println("released", sess)
			}
		}()
	}
	select {}
}
