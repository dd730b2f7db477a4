package owner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// TestP24_TOTPEnrolmentOnlyAdds: a captured seed is stored on a login that
// has none. On a login that has one it changes nothing: the new seed waits
// sealed in the vault (not in the approval), the owner is asked which
// login and site, and only a yes swaps it in; a no, an expiry, or a yes
// for another key's session leave the stored seed as it was and delete
// the staged one. A decision taken by another process (the owner CLI) is
// settled by the approval sweep.
func TestP24_TOTPEnrolmentOnlyAdds(t *testing.T) {
	ctx := context.Background()
	e := newAccounts(t, owner.AccountsConfig{})
	login, err := e.v.AddLogin(ctx, "o", "owner", vault.LoginInput{Site: "example.com", Email: "ada@example.com",
		Password: vault.NewSecret([]byte("Analytical-1843"))})
	if err != nil {
		t.Fatal(err)
	}
	seeds := []string{"MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43U", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP",
		"ONSWG4TFORZWQ2LTORSXG5BAMFZGKYLU", "KRUGS4ZANFZSAYJAONSWG4TFOQQGC3TE", "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"}
	holds := func(want int) bool {
		t.Helper()
		code, err := e.v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: login.ID, Field: vault.FieldTOTP,
			Destination: "login.example.com", Session: "s_1", Actor: "test", Purpose: "check"})
		if err != nil {
			t.Fatal(err)
		}
		exp, err := vault.TOTPCode(vault.NewSecret([]byte(seeds[want])), e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return code.Equal(exp)
	}
	stored := func(want int) {
		t.Helper()
		if !holds(want) {
			t.Fatalf("the login's codes are not those of seed %d", want)
		}
	}
	enrol := func(i int, session string) error {
		_, err := e.acc.EnrollTOTP(ctx, owner.TOTPEnrolment{KeyID: e.keyID, Session: session, LoginID: login.ID,
			Site: "login.example.com", Page: "https://login.example.com/account/2fa?ref=agent#key", Seed: vault.NewSecret([]byte(seeds[i]))})
		return err
	}
	staged := func(ap owner.Approval) bool {
		_, err := e.v.OpenBlob(ctx, "totp-staged/"+ap.ID)
		if err != nil && !errors.Is(err, vault.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	ask := func(i int, session string) owner.Approval {
		t.Helper()
		err := enrol(i, session)
		ap, ok := owner.PendingOf(err)
		if !ok || code(err) != agentvault.CodeApprovalPending {
			t.Fatalf("enrolment %d on a login with a seed: %v", i, err)
		}
		if ap.Kind != owner.KindTOTPReplace || ap.ItemID != login.ID || ap.Site != "login.example.com" ||
			ap.Page != "https://login.example.com/account/2fa" || ap.Session != session || ap.APIKeyID != e.keyID {
			t.Fatalf("the approval does not name the login, the site and the page: %+v", ap)
		}
		if !staged(ap) {
			t.Fatal("the new seed is not staged in the vault")
		}
		return ap
	}

	// Added: the login had no seed.
	if err := enrol(0, "s_1"); err != nil {
		t.Fatal(err)
	}
	stored(0)

	// Replacement denied: kept, staged seed gone.
	ap := ask(1, "s_1")
	stored(0)
	if err := enrol(2, "s_1"); code(err) != agentvault.CodeConflict {
		t.Fatalf("a second replacement while one waits: %v", err)
	}
	if _, err := e.acc.FinishTOTPReplacement(ctx, e.keyID, "s_1", ap.ID); code(err) != agentvault.CodeApprovalPending {
		t.Fatalf("finish before the owner answered: %v", err)
	}
	if _, err := e.acc.FinishTOTPReplacement(ctx, e.keyID, "s_other", ap.ID); code(err) != agentvault.CodeNotFound {
		t.Fatalf("finish from another session: %v", err)
	}
	if _, err := e.svc.Decide(ctx, ap.ID, false, "owner:o@example.com"); err != nil {
		t.Fatal(err)
	}
	if staged(ap) {
		t.Fatal("the denied seed is still staged")
	}
	if _, err := e.acc.FinishTOTPReplacement(ctx, e.keyID, "s_1", ap.ID); code(err) != agentvault.CodeApprovalDenied {
		t.Fatalf("finish after a no: %v", err)
	}
	stored(0)

	// Replacement approved: swapped in by the decision itself.
	ap = ask(2, "s_2")
	if _, err := e.svc.Decide(ctx, ap.ID, true, "owner:o@example.com"); err != nil {
		t.Fatal(err)
	}
	stored(2)
	if staged(ap) {
		t.Fatal("the approved seed is still staged after it was stored")
	}
	if it, err := e.acc.FinishTOTPReplacement(ctx, e.keyID, "s_2", ap.ID); err != nil || it.ID != login.ID {
		t.Fatalf("finish after a yes: %v", err)
	}
	stored(2)

	// Replacement expired: kept.
	ap = ask(3, "s_3")
	e.clock.Add(time.Hour)
	if _, err := e.acc.FinishTOTPReplacement(ctx, e.keyID, "s_3", ap.ID); code(err) != agentvault.CodeApprovalExpired {
		t.Fatalf("finish after the expiry: %v", err)
	}
	if staged(ap) {
		t.Fatal("the expired seed is still staged")
	}
	stored(2)

	// Approved by another process (no Accounts there): the sweep of this
	// one swaps it in.
	ap = ask(4, "s_4")
	cli, err := owner.New(owner.Config{Store: e.st, Org: "o", Now: e.clock.Now, Password: fastPW})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Decide(ctx, ap.ID, true, "owner:cli"); err != nil {
		t.Fatal(err)
	}
	stored(2)
	sweepCtx, stop := context.WithCancel(ctx)
	defer stop()
	go e.svc.RunSweeper(sweepCtx, 5*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for !holds(4) {
		if time.Now().After(deadline) {
			t.Fatal("the sweep did not settle a replacement approved elsewhere")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if staged(ap) {
		t.Fatal("the stored seed is still staged")
	}

	// Nothing of a seed is in an approval the store keeps.
	all, err := e.svc.Approvals(ctx, owner.ApprovalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		for _, s := range seeds {
			if strings.Contains(a.Page+a.Reason+a.Site+a.DecidedBy, s) {
				t.Fatalf("approval %s holds a seed", a.ID)
			}
		}
	}
}
