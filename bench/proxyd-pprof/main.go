// Command proxyd-pprof is proxyd with net/http/pprof, for the bench's
// profile phase only: PROXYD_PPROF=127.0.0.1:PORT serves /debug/pprof/ on
// that loopback address while proxyd.RunCLI runs as cmd/proxyd would.
// It lives in the bench module so that no proxyd build carries pprof.
package main

import (
	"context"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"

	"github.com/agentvault/agentvault/proxyd"
)

func main() {
	if addr := os.Getenv("PROXYD_PPROF"); addr != "" {
		if h, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(h).IsLoopback() {
			log.Fatalf("PROXYD_PPROF must be a loopback host:port, got %q", addr)
		}
		go func() { log.Print(http.ListenAndServe(addr, nil)) }()
	}
	os.Exit(proxyd.RunCLI(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
