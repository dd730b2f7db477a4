// Package control holds the wire types of proxyd's control API and a small Go
// client for it. mcpd talks to proxyd only through this package: it creates a
// browser session, asks for the catalog, authorizes a token for the page it is
// about to fill, reports events, reads the session report and closes the
// session.
//
// The package is the contract between two processes, so it only grows: fields
// and methods are added, never renamed or removed. It must never import
// goproxy, the vault's storage or anything that touches a real secret; the
// only value it carries that may be sensitive is AuthorizeResponse.Value, which
// proxyd fills with a stand-in for secret fields.
package control
