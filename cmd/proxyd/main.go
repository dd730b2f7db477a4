// Command proxyd is agentvault's HTTPS egress proxy: it swaps stand-ins for
// real secrets on the wire to allowed sites and scrubs them from responses.
// Everything lives in package proxyd; this main only wires the
// process's arguments and streams to it.
package main

import (
	"context"
	"os"

	"github.com/agentvault/agentvault/proxyd"
)

func main() {
	os.Exit(proxyd.RunCLI(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
