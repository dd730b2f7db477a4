// Package recipes owns the checkout recipe registry's rules (seed 004's
// Discover stage): what a recipe is (merchant, platform, signup and signup
// platform recipes), the screening of an agent's submission (closed
// vocabularies, never "verified" from an agent, no personal data, the
// budget of 20 submissions in any 24 hours), how a submission for a store
// the registry already knows is combined with its recipe, how a page URL is
// stripped before a lookup, and the four-slot answer of a lookup.
//
// The platform recipes shipped with the appliance (Stripe Payment Element,
// the legacy Stripe Card Element, Shopify) are data in this package; their
// origins come from policy's payment integration list.
//
// It is a domain package: types, pure rules, the Registry service over a
// small Store interface (implemented by store/sqlite, contract in
// recipes/recipestest). It never speaks HTTP or MCP, never opens a database,
// and never sees a secret: a recipe holds selectors and prose, and a
// submission that looks like it carries personal data is refused.
package recipes
