// Package browser drives Debian's Chromium through playwright-go for mcpd. It
// is the only package in the module that imports playwright-go.
//
// It owns: launching one headless Chromium with the flags an offline appliance
// needs, or reaching a browser elsewhere (provider.go: a Playwright browser
// server, a DevTools endpoint, or a managed provider's session API, managed.go,
// with its captcha solver's signals), one browser context per agent session
// (proxied through proxyd with the session's credential, trusting proxyd's CA by
// its SPKI hash, or handing a managed provider the certificate), the page stack
// and popup queue of a session, and the primitive operations the MCP tools are
// built from (navigate, click, press, fill, select, wait, count, accessibility
// snapshot with field selectors, frames, masked screenshots, page signals).
//
// It must never: talk to the vault or the control API, decide policy, log or
// quote a provider's API key or a connect URL, download
// a browser or a driver (playwright.Install is never called), use Playwright's
// IgnoreHTTPSErrors (it breaks through a proxy and would trust any
// certificate), or put a typed value into an error, a log line or a result.
// Values passed to Fill are typed and forgotten.
package browser
