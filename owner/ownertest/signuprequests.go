package ownertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// RunSignupRequests runs the owner.SignupRequestStore part of the suite
// (agents' signup requests and counted login changes); open returns a
// fresh, empty store for each subtest.
func RunSignupRequests(t *testing.T, open func(t *testing.T) owner.SignupRequestStore) {
	t.Run("SignupRequests", func(t *testing.T) { signupRequests(t, open(t)) })
	t.Run("SignupLoginOnceUnderConcurrency", func(t *testing.T) { signupLoginOnce(t, open(t)) })
	t.Run("LoginChanges", func(t *testing.T) { loginChanges(t, open(t)) })
}

func signupRequest(id, org string, created time.Time) owner.SignupRequest {
	return owner.SignupRequest{ID: id, Org: org, APIKeyID: "avk_1", Site: "shop.example.com", Email: "me@example.com",
		Username: "me", Rules: vault.PasswordRules{MinLength: 12, AllowedSymbols: "!#", NoTripleRepeat: true},
		ApprovalID: "apr_" + id, Created: created, Expires: created.Add(time.Hour)}
}

func signupRequests(t *testing.T, st owner.SignupRequestStore) {
	ctx := context.Background()
	if _, err := st.GetSignupRequest(ctx, "sr_missing"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("get of a missing request: %v, want ErrNotFound", err)
	}
	pre := signupRequest("sr_3", "o", t0.Add(2*time.Minute))
	pre.ApprovalID, pre.PreApproved = "", true
	for _, r := range []owner.SignupRequest{
		signupRequest("sr_2", "o", t0.Add(time.Minute)),
		signupRequest("sr_1", "o", t0),
		pre,
		signupRequest("sr_b", "o", t0.Add(time.Minute)), // same time as sr_2: by id
		signupRequest("sr_p", "p", t0),
	} {
		if err := st.CreateSignupRequest(ctx, r); err != nil {
			t.Fatalf("create %s: %v", r.ID, err)
		}
	}
	if err := st.CreateSignupRequest(ctx, signupRequest("sr_1", "o", t0)); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("second create of one id: %v, want conflict", err)
	}
	got, err := st.GetSignupRequest(ctx, "sr_3")
	if err != nil {
		t.Fatal(err)
	}
	if got.Org != "o" || got.APIKeyID != "avk_1" || got.Site != "shop.example.com" || got.Email != "me@example.com" || got.Username != "me" ||
		got.Rules != pre.Rules || got.ApprovalID != "" || !got.PreApproved || got.LoginID != "" ||
		!got.Created.Equal(pre.Created) || !got.Expires.Equal(pre.Expires) {
		t.Fatalf("stored request = %+v", got)
	}
	list, err := st.ListSignupRequests(ctx, "o", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	if fmt.Sprint(ids) != "[sr_2 sr_b sr_3]" {
		t.Fatalf("requests since t0+1m = %v, want [sr_2 sr_b sr_3] (oldest first, at or after since, this org only)", ids)
	}
	if all, _ := st.ListSignupRequests(ctx, "o", time.Time{}); len(all) != 4 || all[0].ID != "sr_1" {
		t.Fatalf("every request of o: %d, first %+v", len(all), all)
	}
}

// signupLoginOnce: of callers racing to record the login made for one
// request, exactly one lands; the others get the stored request (with the
// winner's login) and a conflict. An unknown id is not found.
func signupLoginOnce(t *testing.T, st owner.SignupRequestStore) {
	ctx := context.Background()
	if _, err := st.SetSignupLogin(ctx, "sr_missing", "itm_x"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("set login of a missing request: %v, want ErrNotFound", err)
	}
	if err := st.CreateSignupRequest(ctx, signupRequest("sr_1", "o", t0)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			login := fmt.Sprintf("itm_%d", i)
			r, err := st.SetSignupLogin(ctx, "sr_1", login)
			switch agentvault.ErrorCode(err) {
			case "":
				if r.LoginID != login {
					t.Errorf("winner %s got back login %q", login, r.LoginID)
				}
				mu.Lock()
				winners = append(winners, login)
				mu.Unlock()
			case agentvault.CodeConflict:
				if r.LoginID == "" || r.LoginID == login {
					t.Errorf("loser %s got back login %q, want the winner's", login, r.LoginID)
				}
			default:
				t.Errorf("set login: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d logins recorded for one request: %v", len(winners), winners)
	}
	if got, err := st.GetSignupRequest(ctx, "sr_1"); err != nil || got.LoginID != winners[0] {
		t.Fatalf("stored login %q, %v; want %s", got.LoginID, err, winners[0])
	}
}

func loginChanges(t *testing.T, st owner.SignupRequestStore) {
	ctx := context.Background()
	// Appended out of time order: listed in the order appended.
	for _, c := range []owner.LoginChange{
		{Org: "o", APIKeyID: "avk_1", LoginID: "itm_1", Change: "username", At: t0.Add(2 * time.Minute)},
		{Org: "o", APIKeyID: "avk_1", LoginID: "itm_1", Change: "password", At: t0.Add(time.Minute)},
		{Org: "o", APIKeyID: "avk_2", LoginID: "itm_2", Change: "totp", At: t0},
		{Org: "p", APIKeyID: "avk_3", LoginID: "itm_3", Change: "password", At: t0.Add(time.Hour)},
	} {
		if err := st.AppendLoginChange(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.ListLoginChanges(ctx, "o", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Change != "username" || list[1].Change != "password" || list[1].APIKeyID != "avk_1" ||
		list[1].LoginID != "itm_1" || list[1].Org != "o" || !list[1].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("changes since t0+1m = %+v", list)
	}
	if all, _ := st.ListLoginChanges(ctx, "o", time.Time{}); len(all) != 3 {
		t.Fatalf("every change of o: %d, want 3", len(all))
	}
}
