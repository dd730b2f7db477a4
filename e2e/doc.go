// Package e2e holds the end-to-end proofs: real listeners, a real proxyd,
// the built mcpd binary spoken to over stdio, and Debian's Chromium driven
// through playwright-go, buying from the test merchant in e2e/merchant.
//
// It owns nothing the product runs: its only non-test code is this comment.
// Its tests must never mock a component they claim to prove, never reach
// beyond loopback, never assert on wall-clock time, and never print a secret
// (a failure names the sink and the length of what leaked, not the value).
// They skip under -short, and skip when Chromium or the playwright driver is
// missing locally; under CI=true a missing browser is a failure, not a skip.
package e2e
