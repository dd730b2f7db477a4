// Package httpsigtest is test support: what a merchant's site does with a
// signed request. It verifies HTTP message signatures (RFC 9421) under the
// Web Bot Auth draft's policy and Visa TAP's, fetching and checking the
// agent's key directory (the JWKS at the Signature-Agent origin's
// well-known URI, with its Content-Digest and its possession proofs), and
// refusing replays, expired windows and tampered components.
//
// It is written from the RFCs (9421, 8941, 7638, 8037, 9530) and the drafts
// alone, with its own structured-field parser, signature base and
// thumbprint, and imports nothing of this module: a proof that package
// botauth signs correctly must not run botauth's code on the verifying
// side. It must never be used by the appliance itself, only by tests.
package httpsigtest
