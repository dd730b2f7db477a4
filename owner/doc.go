// Package owner is the owner's side of the appliance: the API keys agents
// connect with, the owner's per-card rules, the destinations the owner has
// authorized, the durable approval queue (new site, purchase, live CVV,
// signup), the owner's account and dashboard sessions, pre-approved signups,
// the sign-ins an agent could not complete (the references of their masked
// captures, held in memory for the Activity page), and the notifications
// that tell the owner something waits for them.
//
// It declares the storage it needs as small interfaces (Store and its parts),
// implemented by store/sqlite and proved by owner/ownertest. Service ties
// them together for proxyd and the dashboard.
//
// It must never hold or see a vault value: an API key secret exists in the
// clear only in the return value of CreateAPIKey, passwords only as argon2id
// hashes, dashboard cookies only as SHA-256 hashes. It must never import an
// HTTP framework, goproxy, playwright, the MCP SDK or a storage driver (the
// webhook and SMTP notifiers live in owner/notify, the web UI in
// owner/dashboard), and it never decides a release itself: package policy
// does, from the values this package loads.
package owner
