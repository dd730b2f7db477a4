// Package merchant is the test merchant the end-to-end proofs buy from: a
// small but realistic shop, a card processor whose form lives in a
// cross-origin iframe, a sign-in site and an echo endpoint, each served over
// HTTPS by its own listener on 127.0.0.1 with certificates from a CA the
// package generates at start.
//
// It owns the merchant side of the proofs: what each origin received is
// recorded so a test can assert that the processor saw the real card number
// and the shop never did. It is deliberately independent of the rest of the
// module (it imports only the standard library), so it can be started before
// any part of the appliance exists and cannot be bent to make a proof pass.
//
// It must never be reachable from anything but loopback, never load a
// resource from outside its own origins, and never print what it received:
// recorded bodies hold real test card numbers and passwords, so callers ask
// whether a value was seen (Saw) rather than printing requests.
package merchant
