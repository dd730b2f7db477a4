// Package broker is the one home of release decisions (docs/secret-path.md).
// It owns the proxy sessions and their grants: an authorize asks policy and
// the owner's rules (Config.Authorizer, a policy.Authorizer) and makes a
// grant bound to a session, a key, the origins it may go to, an amount for a
// card, an expiry and a use rule (P21); Release is the only way a real value
// goes on the wire, after checking the grant and the owner's current state
// (the Authorizer's Recheck), audited before the value is returned (P12),
// its recipient recorded for scrubbing (P10); ScrubSet lists exactly the
// values a host was sent, so scrubbing is no oracle. New refuses to run
// without a vault, a key lookup or an Authorizer: no missing part allows.
//
// With a SessionStore the sessions and grants live in the store and the
// in-memory Session is a cache, so several proxyd replicas serve any session
// and a one-purchase grant is claimed in the store (shared.go); a Notifier
// tells the other replicas what changed. Without one, everything stays in
// this process.
//
// The proxy mechanism (TLS, HTTP/1.1 and h2, WebSocket, rewriting, matching
// and scrubbing bytes) is package intercept's, which asks the broker through
// these few calls. The broker must never see HTTP, never log or return a
// real value except from Release, and never decide a release from anything
// but the grant, the item, policy and the owner's state.
package broker
