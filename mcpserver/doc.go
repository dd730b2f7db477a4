// Package mcpserver is mcpd: the MCP server an agent drives a checkout or a
// sign-in through. It owns the tools (get_token_catalog, open_page, click,
// press, wait_for_selector, count, wait_for_popup, close_popup,
// fill_checkout, fill_login, snapshot_page, observe_page, list_frames,
// detect_challenge, get_session_outcome, get_run_report, close_session, and
// the recipe registry's get_checkout_recipes, submit_checkout_recipe and
// get_recipe_submission, which reach proxyd's registry over the control API),
// their JSON schemas, the status line every answer starts with, the mapping
// of error codes to isError results (statusError, the one place), the card
// field order rules, and the per-session state those rules need. A fill
// whose authorize is pending on the owner waits for them inside the call
// (owner_wait.go: progress notifications, long polls of control Wait, a
// fresh authorize after a yes). Main serves MCP on stdio, or on streamable
// HTTP bound to loopback with --http. Every call passes the call layer of
// package hosted (retries, call deadlines and pending answers, and on the
// hosted server its session table and HTTP transport); calls.go is the seam
// between the two.
//
// It must never: read the vault or its storage (everything secret goes
// through proxyd's control API: a token is authorized there and what comes
// back is what gets typed), import goproxy or playwright-go (the browser
// package owns Chromium), write to stdout outside the MCP stream, or put a
// typed value, a stand-in or a real value in a result, a log line or an
// error message.
package mcpserver
