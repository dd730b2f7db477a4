package skills_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/skills"
)

const sankhyaSkill = `---
name: extrair-pedidos-sankhya
description: Pulls the day's orders out of Sankhya.
credentials: [sankhya]
---
Run orders.py with the URL credential_use gives.
`

// Seed 003: a credentials field that is not a list of credential names
// makes the write of SKILL.md fail, naming the field; nothing is written.
func TestCredentials_SkillFrontmatterCredentialsValidatedOnWrite(t *testing.T) {
	root := t.TempDir()
	d, err := skills.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"string":       "credentials: sankhya",
		"map":          "credentials: {sankhya: true}",
		"number item":  "credentials: [1]",
		"bad name":     "credentials: [\"Sankhya Prod\"]",
		"nested":       "credentials: [[sankhya]]",
		"repeated":     "credentials: [sankhya, sankhya]",
		"object items": "credentials:\n  - name: sankhya",
	}
	for name, line := range bad {
		t.Run(name, func(t *testing.T) {
			content := "---\nname: s1\ndescription: x\n" + line + "\n---\nbody\n"
			_, err := d.WriteFile("s1/SKILL.md", []byte(content))
			if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput || !strings.Contains(agentvault.ErrorMessage(err), "credentials") {
				t.Fatalf("write: %v; want invalid_input naming credentials", err)
			}
			if _, err := os.Stat(filepath.Join(root, "s1", "SKILL.md")); err == nil {
				t.Fatal("an invalid SKILL.md was written")
			}
		})
	}
	sk, err := d.WriteFile("extrair-pedidos-sankhya/SKILL.md", []byte(sankhyaSkill))
	if err != nil || sk == nil || len(sk.Credentials) != 1 || sk.Credentials[0] != "sankhya" {
		t.Fatalf("valid skill: %+v, %v", sk, err)
	}
	if _, err := d.WriteFile("other/SKILL.md", []byte(sankhyaSkill)); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("SKILL.md in another skill's folder: %v", err)
	}
	for _, p := range []string{"../escape/SKILL.md", "/etc/x", "a/../../b"} {
		if _, err := d.WriteFile(p, []byte("x")); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Fatalf("path %q: %v", p, err)
		}
	}
	if _, err := d.WriteFile("extrair-pedidos-sankhya/orders.py", []byte("print(1)\n")); err != nil {
		t.Fatalf("a helper file: %v", err)
	}
}

// Seed 003: skill_find returns the credentials a skill declares.
func TestCredentials_SkillFindShowsCredentials(t *testing.T) {
	d, err := skills.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteFile("extrair-pedidos-sankhya/SKILL.md", []byte(sankhyaSkill)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteFile("hello/SKILL.md", []byte("---\nname: hello\ndescription: Says hello.\n---\n")); err != nil {
		t.Fatal(err)
	}
	got, err := d.Find("sankhya")
	if err != nil || len(got) != 1 || got[0].Name != "extrair-pedidos-sankhya" || len(got[0].Credentials) != 1 || got[0].Credentials[0] != "sankhya" {
		t.Fatalf("Find(sankhya) = %+v, %v", got, err)
	}
	all, err := d.Find("")
	if err != nil || len(all) != 2 || all[1].Credentials == nil {
		t.Fatalf("Find() = %+v, %v", all, err)
	}
}
