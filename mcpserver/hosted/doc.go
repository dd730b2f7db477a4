// Package hosted is the call layer of mcpd's MCP server: every tool call
// runs through Calls.Dispatch, which applies the rules a call is under
// before and after the tool itself runs. On the local server (stdio) those
// are the retry rules and the call deadlines; on the hosted server (mcpd
// over streamable HTTP, seed 004 "On the hosted server") besides:
//
//   - connections: one per API key the client authenticated with (the
//     owner's connected app), each with its session table: sessions by the
//     handle an answer names, the session limit, the idle, age and
//     credential limits and their sweeper, and the record of an ended
//     session (hosted.go);
//   - replay (replay.go): a retransmitted call that changes something gets
//     its first answer and never runs twice (P20), and only the client that
//     made the call gets it (P24);
//   - flights and pending answers (pending.go): a call answers pending past
//     its deadline or when it waits on the owner, get_pending_result fetches
//     its answer, and a call past its limit answers hard_timeout;
//   - the HTTP transport (http.go): no Mcp-Session-Id, DELETE refused, API
//     keys as bearer tokens checked over the control API;
//   - the connected apps report to the owner's dashboard (apps.go).
//
// The tools themselves, their sessions and the wording of their answers are
// package mcpserver's: it implements Tools and Session, so this package
// never sees a browser, a page or a tool's arguments beyond their bytes.
//
// It must never: import mcpserver, browser or playwright, the vault or the
// owner's packages; word an answer's status itself (Tools does: the one
// mapping of an error to an isError result is mcpserver's); replay an answer
// to a client that did not prove it made the call; log a key, a handle's
// arguments or an answer's text.
package hosted
