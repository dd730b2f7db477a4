// Package managedtest is test support for browsers mcpd does not launch
// (issue 28): a Chromium started as a process of its own with a DevTools
// endpoint (the cdp provider, as Browserless serves one), Playwright's
// browser server (`launch-server`, the playwright provider), and a local
// double of the managed providers' session APIs, Steel Cloud and
// Browserbase, which starts a real Chromium per session behind a proxy
// chained to the customer's with the session's credential, trusts the CA
// certificate it was handed, plays the provider's captcha solver (its
// signals as documented: Browserbase's console messages, Steel's captcha
// status API) and stops the browser when the session is released.
//
// It is a double, clearly not the providers: their services are not
// reachable from the machines the tests run on. It must never be linked
// into mcpd or proxyd, and it imports no project package.
package managedtest
