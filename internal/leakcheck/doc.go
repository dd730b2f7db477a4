// Package leakcheck is test support: the one way a test looks for a planted
// secret (a canary) in what the code wrote, for the P11 proofs ("a secret
// never appears in any output"). It must never be imported by non-test code.
//
// A check must fire on a leak and only on a leak. Grepping everything for a
// value does that for a long random value, but not for a three-digit CVV:
// logs and answers are full of durations, counts, ports and ids, and "737"
// turned up in "ms=737" in a full run (issue 31). So a canary is
// checked in one of two ways, by its length:
//
//   - A long canary (MinLong bytes or more: card numbers, passwords, seeds,
//     keys) is looked for as a substring of every sink, in every encoding a
//     leak could take on the way out: raw, URL query and path escaping, JSON
//     string escaping, HTML escaping and numeric entities, base64 (standard
//     and URL alphabets) at each of the three alignments, and a card number
//     grouped by four with spaces, dashes, %20 or +. A long canary must be
//     distinctive: drawn at run time (CardNumber, or random hex), or a
//     fixture nothing prints unless it leaked; never a word or a well-known
//     test card a page may show.
//   - A short canary (MinShort to MinLong-1 bytes: a CVV, a PIN, a short
//     stand-in) is looked for only where a value could actually leak, and
//     only as a whole field: in the string values of structured output
//     (JSON and logfmt log attributes, JSON tool answers, metric label
//     values) and in the text of tool answers, as an occurrence not glued to
//     letters or digits (see bounded: "1.737ms", "41737" and "s_1737" do not
//     count, "cvc=737&", `"737"` and "code 737." do). Numbers the program
//     measured (JSON numbers, unquoted numeric logfmt values such as ms=737,
//     metric sample values, the handler's time and level) are not page or
//     request data and are not read. In free text (pages, HTTP bodies,
//     lines that are not structured logs) only delimited forms count:
//     "737" in quotes, >737<, =737&, a line of its own and the like. In
//     bytes that are not text (a screenshot, a database file of
//     ciphertext) a short value is noise and is not looked for: a value
//     at rest is covered by the long values sealed with it.
//
// What is left for a short canary is a program number that lands bounded
// inside a string: an HTTP status in an error text, a year in a date
// picker. Values chosen at run time avoid those (Digits, Common), and a
// test whose short canary could surface as a whole logfmt attribute (cvc=737
// unquoted reads as a count) gives the code under test a JSON logger, where a
// string is a string.
//
// The rule the tree keeps (TestNoBareLogGrep walks every *_test.go file): a
// test outside this package never searches log text with
// strings/bytes.Contains, Index, LastIndex or Count (or a regexp built at run
// time) for anything but a string constant of at least MinLong bytes. "Log
// text" is an expression that names a log: an identifier or field whose
// words (split at camel case, digits and underscores) include "log", "logs",
// "logged" or "logger" (logs, ap.logs, proxydLogs, logBuf; not login or
// catalog), or a local variable assigned or ranged from such an expression
// (one step). A process's stderr that is its log is named so (e2e's
// mcpAgent.logs). A constant that long is an assertion that a known
// line was written; any other search of a log is a canary check and goes
// through a Checker.
package leakcheck
