// Package credentials owns portal credentials (seed 003): the logins and API
// keys a skill's runtime needs to sign in to a portal (an ERP, a bank),
// entered by a person through a one-time link and fetched by the runtime
// through a one-time URL, so no value ever passes through the model's
// context or a .env file.
//
// It holds the types (members and roles, teams, credentials, grants, links),
// the rules (who may see, use, change, delete and share what; which
// credential a name selects; the lifetime of each kind of link) and the
// Service that applies them over a Store and the vault. Values are sealed
// and audited by package vault (vault.PutCredential, ReleaseCredential);
// this package never holds a value longer than one call and never puts one
// in an error, a log or a listing.
//
// It must never import HTTP, the MCP SDK, a browser or a storage engine: the
// SQLite adapter is store/sqlite, the contract credentials/credtest.
package credentials
