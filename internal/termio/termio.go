// Package termio is the process's terminal as the owner CLIs (`proxyd vault`,
// `proxyd owner`) need it: whether standard input is a terminal, and a
// prompt that reads a secret without echoing it. It never reads a secret
// from an argument or the environment, and it prints prompts on standard
// error so that standard output stays the command's answer.
package termio

import (
	"fmt"
	"os"

	"golang.org/x/term"
)

// Stdin returns the two hooks the CLIs' Env structs take for the real
// standard input.
func Stdin() (isTerminal func() bool, readPassword func(prompt string) ([]byte, error)) {
	fd := int(os.Stdin.Fd())
	isTerminal = func() bool { return term.IsTerminal(fd) }
	readPassword = func(prompt string) ([]byte, error) {
		fmt.Fprint(os.Stderr, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		return b, err
	}
	return isTerminal, readPassword
}
