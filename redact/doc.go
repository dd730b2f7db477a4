// Package redact keeps page data that reaches an agent free of secrets once a
// vault value has been typed (P19, P11): it scrubs error text read from a
// page, refuses selectors and key chords that could read a filled value back,
// gates the accessibility snapshot and the frame list after a fill, validates
// page-hint selectors, and names the fields a screenshot must mask.
//
// It is pure: functions over strings and bytes, with no browser, no MCP, no
// network and no storage. It must never log, return or embed in an error the
// text it was asked to scrub, and when it cannot tell whether something is
// safe it refuses (fail closed) rather than letting it through.
package redact
