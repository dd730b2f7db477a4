// Package tokens owns the vocabulary the agent types instead of secrets, and
// the byte-level machinery that finds it again on the wire.
//
// It holds four things:
//
//   - the token grammar (av_<kind>_<label>_<field>_<suffix>), the per-key
//     suffix derived from the deployment secret, and login labels;
//   - the token catalog an agent reads (seed 004, get_token_catalog), built
//     from item metadata only;
//   - format-preserving stand-ins (card number, CVV, TOTP, password) and a
//     Session that keeps them unique and maps them to bindings;
//   - a multi-pattern Matcher and Replacer over byte slices and streams, the
//     hot path the proxy uses to substitute tokens and scrub real values.
//     On amd64 its prefilter is a small assembly routine (teddy_amd64.s)
//     with an AVX-512 VBMI and an AVX2 form, picked by CPU; the portable Go
//     path is used elsewhere and under the purego build tag. All three are
//     tested, and fuzzed against a reference, on a machine that has them.
//
// It must never: import goproxy, playwright, the MCP SDK, a storage driver
// or anything that pulls in net/http (deps_test.go); import or read the
// vault (it names items through the leaf vault/item and sees the item.Item
// metadata and item.Secret values handed to it, nothing else);
// log; or put a value it scans, replaces or generates into an error
// message. Errors carry lengths and codes, never bytes.
package tokens
