// Package proxyd is the proxyd process as a library: strict configuration,
// the Main type that opens the vault, the MITM CA, the API key and control
// token files, and serves the proxy, control and admin listeners, and the
// command-line entry point cmd/proxyd calls. The e2e tests start the same
// Main.
//
// Every fill is decided by the owner's rules (owner.Service.Authorize): a
// site the owner has not authorized waits for their approval (P1), a card is
// released only for a total its rules allow, and the request carrying the
// number may not carry a larger amount (P18).
//
// It must never start with a configuration it could not fully validate,
// decide a fill without the owner's rules, resolve unsafe_test_hosts unless
// unsafe_allow_private_ranges is on too, listen with the control or admin
// API on a non-loopback address, or print a secret (the API key and control
// token go to 0600 files, never to logs).
package proxyd
