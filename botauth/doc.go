// Package botauth owns the agent's identity on the wire: HTTP message
// signatures (RFC 9421) that tell a site which agent is asking, per the Web
// Bot Auth protocol (draft-meunier-webbotauth-httpsig-protocol, tag
// "web-bot-auth") and, where the owner turns it on for a site, Visa's
// Trusted Agent Protocol (tags "agent-browser-auth" and "agent-payer-auth").
//
// It holds the pure parts: the signature base (RFC 9421 section 2.5) over
// the derived components @authority and @path and the Signature-Agent
// dictionary member, the Signature-Input and Signature structured fields
// (RFC 8941), Ed25519 signing, the JWK thumbprint key id (RFC 7638, RFC 8037
// appendix A.3), the signed key directory a site fetches from the
// Signature-Agent origin (http-message-signatures-directory), the keyring
// (rotation keeps an old key published until the signatures it made have
// expired) and the owner's rules (which sites, which tags, windows, nonces).
//
// The private keys never leave this package except sealed: Keyring's one
// encoder is named for the danger, and a Key prints as its public key id.
// The agent never holds a key: proxyd signs on its behalf, after
// substitution, for the sites the owner chose and no other (none by
// default: an identity is a disclosure).
//
// It must never serve HTTP, dial anything, read the vault or import goproxy:
// proxyd seals the keyring in the vault and serves the directory, and
// intercept asks for a signature through its own small interface.
package botauth
