package main

import (
	"io"

	"github.com/agentvault/agentvault/mcpserver"
)

func newMainForTest(tokenFile string) *mcpserver.Main {
	m := mcpserver.NewMain()
	m.ControlTokenFile = tokenFile
	m.Stderr = io.Discard
	return m
}
