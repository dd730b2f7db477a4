// Package proxyd is the proxyd process as a library: strict configuration,
// the Main type that opens the vault, the MITM CA, the API key and control
// token files, and serves the proxy, control and admin listeners, and the
// command-line entry point cmd/proxyd calls. The e2e tests start the same
// Main.
//
// It must never start with a configuration it could not fully validate,
// listen with the control or admin API on a non-loopback address, or print
// a secret (the API key and control token go to 0600 files, never to logs).
package proxyd
