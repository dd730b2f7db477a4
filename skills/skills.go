// Package skills is the minimal skill registry seed 003 implies: a
// directory the owner configures, holding one folder per skill with its
// SKILL.md (YAML frontmatter: name, description, credentials). The product
// had no skill store before; this is only what the credential rules need:
// every write of a SKILL.md is validated (credentials must be a list of
// credential names, and the error names the field), and Find shows what
// each skill needs, so an agent can check it against credential_list
// before running the skill.
//
// It reads and writes files under its root only (os.Root: no "..", no
// symlink out). It never sees a credential value.
package skills

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials/credname"
	"gopkg.in/yaml.v3"
)

// FileName is the skill definition file in each skill's folder.
const FileName = "SKILL.md"

// maxFile bounds a file written through the registry.
const maxFile = 256 << 10

var skillNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Skill is a SKILL.md's frontmatter.
type Skill struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Credentials []string `json:"credentials"`
}

func invalid(format string, args ...any) error {
	return agentvault.Errorf(agentvault.CodeInvalidInput, format, args...)
}

// Parse reads and validates a SKILL.md's frontmatter. credentials, when
// present, must be a list of credential names (credname.Valid); any
// other shape is refused with a message naming the field.
func Parse(content []byte) (Skill, error) {
	content = bytes.TrimPrefix(content, []byte("\ufeff"))
	rest, ok := bytes.CutPrefix(content, []byte("---\n"))
	if !ok {
		rest, ok = bytes.CutPrefix(content, []byte("---\r\n"))
	}
	if !ok {
		return Skill{}, invalid("SKILL.md must start with a YAML frontmatter block between --- lines")
	}
	end := bytes.Index(rest, []byte("\n---"))
	if end < 0 {
		return Skill{}, invalid("SKILL.md frontmatter has no closing --- line")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(rest[:end], &doc); err != nil {
		return Skill{}, invalid("SKILL.md frontmatter is not valid YAML")
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return Skill{}, invalid("SKILL.md frontmatter must be a YAML mapping (name, description, credentials)")
	}
	var s Skill
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i].Value, m.Content[i+1]
		switch k {
		case "name":
			if v.Kind != yaml.ScalarNode || !skillNameRE.MatchString(v.Value) {
				return Skill{}, invalid("frontmatter field name: lower case letters, digits, '_' or '-' (at most 64)")
			}
			s.Name = v.Value
		case "description":
			if v.Kind != yaml.ScalarNode || len(v.Value) > 1024 {
				return Skill{}, invalid("frontmatter field description: one text of at most 1024 characters")
			}
			s.Description = v.Value
		case "credentials":
			creds, err := parseCredentials(v)
			if err != nil {
				return Skill{}, err
			}
			s.Credentials = creds
		}
	}
	if s.Name == "" {
		return Skill{}, invalid("frontmatter field name is required")
	}
	return s, nil
}

func parseCredentials(v *yaml.Node) ([]string, error) {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, invalid("frontmatter field credentials must be a list of credential names, e.g. credentials: [sankhya]")
	}
	out := []string{}
	for i, e := range v.Content {
		if e.Kind != yaml.ScalarNode || e.Tag != "!!str" || !credname.Valid(e.Value) {
			return nil, invalid("frontmatter field credentials[%d] is not a credential name (lower case letters, digits, '.', '_' or '-')", i)
		}
		if slices.Contains(out, e.Value) {
			return nil, invalid("frontmatter field credentials[%d] repeats a name", i)
		}
		out = append(out, e.Value)
	}
	return out, nil
}

// Dir is a registry rooted at a directory the owner configures.
type Dir struct {
	root string
}

// Open returns the registry at root, creating the directory if needed.
func Open(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the skills directory")
	}
	return &Dir{root: root}, nil
}

// cleanPath admits "<skill>/<file>" style relative paths only.
func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	c := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if p == "" || path.IsAbs(c) || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsAny(c, "\x00\r\n") || len(c) > 300 {
		return "", invalid("path must be relative to the skills directory, e.g. my-skill/SKILL.md")
	}
	return c, nil
}

// WriteFile writes a file under the registry. A SKILL.md is validated
// first (Parse), and must sit in a folder named after the skill: this is
// the one path that writes a skill, so no invalid one is ever stored.
func (d *Dir) WriteFile(p string, content []byte) (*Skill, error) {
	c, err := cleanPath(p)
	if err != nil {
		return nil, err
	}
	if len(content) > maxFile {
		return nil, invalid("file too large (at most %d bytes)", maxFile)
	}
	var sk *Skill
	if path.Base(c) == FileName {
		s, err := Parse(content)
		if err != nil {
			return nil, err
		}
		if path.Dir(c) != s.Name {
			return nil, invalid("a SKILL.md goes in the folder named after its skill: %s/%s", s.Name, FileName)
		}
		sk = &s
	}
	root, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the skills directory")
	}
	defer root.Close()
	if dir := path.Dir(c); dir != "." {
		if err := root.MkdirAll(dir, 0o700); err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot create the folder of that path")
		}
	}
	tmp := c + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot write that path")
	}
	_, werr := f.Write(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, c)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return nil, agentvault.Wrap(agentvault.CodeInternal, werr, "cannot write that path")
	}
	return sk, nil
}

// Find lists the skills whose name or description contains query (all
// when empty), with the credentials each needs. A SKILL.md that does not
// parse (edited by hand) is skipped.
func (d *Dir) Find(query string) ([]Skill, error) {
	entries, err := os.ReadDir(d.root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []Skill{}, nil
		}
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot read the skills directory")
	}
	root, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the skills directory")
	}
	defer root.Close()
	q := strings.ToLower(strings.TrimSpace(query))
	out := []Skill{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		f, err := root.Open(e.Name() + "/" + FileName)
		if err != nil {
			continue
		}
		b := make([]byte, maxFile)
		n, _ := f.Read(b)
		f.Close()
		s, err := Parse(b[:n])
		if err != nil || s.Name != e.Name() {
			continue
		}
		if q == "" || strings.Contains(s.Name, q) || strings.Contains(strings.ToLower(s.Description), q) {
			if s.Credentials == nil {
				s.Credentials = []string{}
			}
			out = append(out, s)
		}
	}
	return out, nil
}
