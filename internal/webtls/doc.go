// Package webtls gives a web listener of the appliance its TLS: a
// certificate from ACME (certmagic) for a public domain, the owner's own
// certificate, or a leaf from the deployment's local root (LocalCA, sealed
// in the vault through a BlobStore), and Serve, which serves a handler with
// it until the context ends. The owner's dashboard and mcpd's hosted server
// use it; it knows nothing of either (no owner, no vault, no MCP), so mcpd
// links none of the owner's side for its certificate.
package webtls
