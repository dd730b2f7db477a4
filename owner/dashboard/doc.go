// Package dashboard is the owner's web UI, served by proxyd on its own TLS
// listener: sign-in, the pending approvals (with a banner on every page),
// cards and their rules, logins, API keys, authorized sites, pre-approved
// signups, the sites the agent's requests are signed for (signing.go) and
// the activity log. Pages are server-rendered html/template
// with plain HTML forms (POST, then a 303 redirect), so approving works
// without JavaScript; the pages carry none.
//
// Every form carries a CSRF token derived from the session cookie; cookies
// are Secure, HttpOnly and SameSite=Strict with the __Host- prefix; sign-in
// is rate limited per client address and per email.
//
// The owner adds cards and logins here (the vault's own validation, with a
// message next to each refused input), edits where a card may be used and
// its holder (vault.UpdateCard), and removes items after a confirmation
// page. Values only go in: the number, CVV, password and TOTP seed are read
// from the POST, sealed, and never written back into a re-rendered form, a
// redirect, a flash, or a log line; their inputs carry autocomplete="off"
// and every page is Cache-Control: no-store. The dashboard must never call
// Release, never render a secret, and never put a cookie, a key secret or a
// password into a log line. A new API key's secret is shown once, in the
// response to its creation, and never again.
package dashboard
