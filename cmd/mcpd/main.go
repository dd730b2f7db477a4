package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/mcpserver"
)

func main() {
	m := mcpserver.NewMain()
	// TLS for the hosted server comes from package webtls (as the dashboard's): ACME
	// with certmagic for a domain, a locally issued certificate otherwise.
	m.TLSConfig = func(ctx context.Context, o mcpserver.TLSOptions) (*tls.Config, error) {
		return webtls.TLSConfig{Domain: o.Domain, Email: o.Email, DataDir: o.DataDir, Hosts: o.Hosts}.TLS(ctx)
	}
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := m.Run(ctx)
	stop()
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpd:", err)
		os.Exit(1)
	}
}
