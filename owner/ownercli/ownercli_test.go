package ownercli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownercli"
	"github.com/agentvault/agentvault/vault/sqlite"
)

func env(t *testing.T, stdin string) (ownercli.Env, *bytes.Buffer, *bytes.Buffer, string) {
	path := filepath.Join(t.TempDir(), "vault.db")
	var out, errb bytes.Buffer
	return ownercli.Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Open: func(context.Context) (*owner.Service, func() error, error) {
			st, err := sqlite.Open(path)
			if err != nil {
				return nil, nil, err
			}
			s, err := owner.New(owner.Config{Store: st, Org: "default", Password: owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1}})
			return s, st.Close, err
		},
	}, &out, &errb, path
}

func TestSetPasswordFromStdin(t *testing.T) {
	e, out, errb, _ := env(t, "correct horse battery staple\n")
	if code := ownercli.Run(context.Background(), []string{"set-password", "--email", "Me@Example.com"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "me@example.com") || strings.Contains(out.String()+errb.String(), "horse") {
		t.Fatalf("output: %q", out)
	}
	s, closeFn, _ := e.Open(context.Background())
	defer closeFn()
	if _, err := s.CheckOwnerPassword(context.Background(), "me@example.com", "correct horse battery staple"); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesPasswordArgument(t *testing.T) {
	e, _, errb, _ := env(t, "")
	if code := ownercli.Run(context.Background(), []string{"set-password", "--email", "a@b.c", "--password=hunter2hunter2"}, e); code != 2 || strings.Contains(errb.String(), "hunter2") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

func TestCreateKeyPrintsOnceAndRevokes(t *testing.T) {
	e, out, errb, _ := env(t, "")
	if code := ownercli.Run(context.Background(), []string{"create-key", "--name", "agent", "--all-cards"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	key := regexp.MustCompile(`avk_[0-9a-f]{16}_[0-9a-f]{64}`).FindString(out.String())
	if key == "" {
		t.Fatalf("no key printed")
	}
	out.Reset()
	if code := ownercli.Run(context.Background(), []string{"keys"}, e); code != 0 || strings.Contains(out.String(), key[21:]) || !strings.Contains(out.String(), key[:20]) {
		t.Fatalf("keys: exit %d", code)
	}
	if code := ownercli.Run(context.Background(), []string{"revoke", key[:20]}, e); code != 0 {
		t.Fatalf("revoke: %s", errb)
	}
	out.Reset()
	ownercli.Run(context.Background(), []string{"keys"}, e)
	if !strings.Contains(out.String(), "revoked") {
		t.Fatalf("keys after revoke: %s", out)
	}
}

func TestApproveFromCLI(t *testing.T) {
	e, out, errb, _ := env(t, "")
	s, closeFn, _ := e.Open(context.Background())
	a, err := s.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "shop.example"})
	closeFn()
	if err != nil {
		t.Fatal(err)
	}
	ownercli.Run(context.Background(), []string{"pending"}, e)
	if !strings.Contains(out.String(), a.ID) {
		t.Fatalf("pending: %s", out)
	}
	if code := ownercli.Run(context.Background(), []string{"approve", a.ID}, e); code != 0 {
		t.Fatalf("approve: %s", errb)
	}
	out.Reset()
	ownercli.Run(context.Background(), []string{"sites"}, e)
	if !strings.Contains(out.String(), "shop.example") {
		t.Fatalf("sites: %s", out)
	}
}
