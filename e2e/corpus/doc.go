// Package corpus serves the page shapes the MCP bench (e2e/benchmcp) and the
// snapshot tests read: a long product listing, a checkout with five
// cross-origin iframes, a page built from web components in shadow DOM,
// selects with hundreds of options, a single-page app that renders after its
// load and re-renders on input, and a checkout whose payment frame mounts
// late. Each shape is generated here, deterministically, from nothing but
// the standard library, and served over HTTPS by listeners on loopback
// addresses of their own (127.0.0.1 for the pages, 127.0.0.2 to 127.0.0.7 for
// the frames), so every frame is a different site, the way a processor's
// frame is on the web, and Chromium puts it in a process of its own.
//
// It owns the pages and what the bench needs to know to drive them (Pages:
// which field to type in, which button to click, which link navigates, which
// form posts, which frame takes the card). It must never load anything from
// outside its own origins, never record or print what a page received, and
// never be imported by non-test code of the product.
package corpus
