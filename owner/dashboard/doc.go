// Package dashboard is the owner's web UI, served by proxyd on its own TLS
// listener: sign-in, the pending approvals (with a banner on every page),
// cards and their rules, logins, API keys, authorized sites, pre-approved
// signups and the activity log. Pages are server-rendered html/template
// with plain HTML forms (POST, then a 303 redirect), so approving works
// without JavaScript; the pages carry none.
//
// Every form carries a CSRF token derived from the session cookie; cookies
// are Secure, HttpOnly and SameSite=Strict with the __Host- prefix; sign-in
// is rate limited per client address and per email. It reads the vault only
// through List and Audit (metadata and audit records): it must never call
// Release, never render a secret, and never put a cookie, a key secret or a
// password into a log line. A new API key's secret is shown once, in the
// response to its creation, and never again.
package dashboard
