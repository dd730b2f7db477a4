// Package authz is the one home of who may do what (promise P24).
//
// Every action a person, an agent or the owner's shell can take has exactly
// one entry here: each dashboard route and form (Dashboard), each owner and
// vault command of the CLI (CLI), and each control API call (Control). An
// entry names the least standing that may take the action: anyone (the
// sign-in page), any signed-in person (their own things: the service behind
// the route checks ownership), a manager (owner or admin), the owner (and an
// admin the owner delegated that area to), an agent's key within its scope,
// or the owner at the appliance's shell. A surface registers its routes and
// commands through Lookup; one without an entry is refused, and each
// surface's tests enumerate what it registered against this table so a new
// route cannot ship without a rule.
//
// The package also owns the role ladder (owner > admin > member) and the one
// rule for changing a role (SetRole): nobody changes the role of someone at
// or above their own rank, nobody gives a role above their own, and the last
// owner cannot be demoted.
//
// authz decides; it stores nothing, speaks no HTTP and imports no other
// project package but the root's error type.
package authz
