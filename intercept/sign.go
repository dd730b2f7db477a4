package intercept

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// RequestSigner puts the agent's identity on a request the proxy is about
// to send: HTTP message signatures (RFC 9421) for the sites the owner
// chose. proxyd wires package botauth's signer (with the audit and the
// metrics); a nil Config.Signer signs nothing.
type RequestSigner interface {
	// SignRequest returns the header fields to add (Signature-Agent,
	// Signature-Input, Signature), or none when the request's site was not
	// chosen. An error refuses the request (fail closed).
	SignRequest(ctx context.Context, a SignArgs) (http.Header, error)
}

// SignArgs is what a signature covers of the outgoing request, as it goes
// on the wire, and who it runs for (for the audit record).
type SignArgs struct {
	Org, Session, KeyID string
	// Host is the destination host, normalised; Authority the request's
	// authority as sent (host, and the port when not 443); Path the target
	// path as sent, percent-encoding kept.
	Host, Authority, Path string
	// Payment: the request carries a card value the proxy released.
	Payment bool
}

// signatureFields are the fields only proxyd may put on a request.
var signatureFields = []string{"Signature", "Signature-Input", "Signature-Agent"}

func init() { knownCodes[agentvault.CodeSignatureHeaders] = true }

// signRequest runs after substitution, on the request exactly as it will
// go upstream (h1 or h2), so a signature covers what the site receives.
// The agent's own signature fields are refused, never forwarded: an
// identity goes on the wire only where the owner chose, signed by proxyd.
func (s *Server) signRequest(ctx context.Context, t *tunnel, out *http.Request, sb *substitution) error {
	for k := range out.Header {
		for _, f := range signatureFields {
			if strings.EqualFold(k, f) {
				return agentvault.Errorf(agentvault.CodeSignatureHeaders, "the request carries its own %s header: remove it; proxyd signs requests for the sites the owner chose, and the agent never signs", f)
			}
		}
	}
	if s.cfg.Signer == nil {
		return nil
	}
	h, err := s.cfg.Signer.SignRequest(ctx, SignArgs{
		Org: t.sess.Key.Org, Session: t.sess.ID, KeyID: t.sess.Key.ID,
		Host: t.dest.Host, Authority: strings.ToLower(out.Host), Path: out.URL.EscapedPath(),
		Payment: sb != nil && slices.Contains(sb.kinds, vault.KindCard),
	})
	if err != nil {
		return err
	}
	for k, vs := range h {
		out.Header[http.CanonicalHeaderKey(k)] = vs
	}
	return nil
}
