// Package credname is the one rule for a portal credential's name
// ("sankhya", "erp-prod"), shared by package credentials, which stores
// credentials under such names, and package skills, which reads them from a
// SKILL.md's frontmatter. It is a leaf so that a skill registry (and mcpd
// through it) can check a name without linking the credentials service or
// the vault.
//
// It must never import another project package: it is a grammar, nothing
// more.
package credname

import "regexp"

// nameRE is a closed grammar: a name is an identifier a skill writes and a
// runtime reads from JSON, so it keeps out of HTML, logs and SQL trouble and
// keeps user text out of error messages.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Valid reports whether s is a credential name: a lower case letter or a
// digit, then up to 63 lower case letters, digits, '.', '_' and '-'.
func Valid(s string) bool { return nameRE.MatchString(s) }
