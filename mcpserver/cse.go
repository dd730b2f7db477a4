package mcpserver

import (
	"github.com/agentvault/agentvault"
)

// refuseClientSideEncryption refuses a fill into a frame (or page) whose
// payment integration encrypts the card in its own script before it leaves
// the browser (Adyen secured fields and the like). proxyd substitutes real
// values on the wire; an encrypted blob holding a stand-in cannot be
// substituted, so the purchase would fail, or worse, be charged to nothing
// the owner allowed. Refusing before the first keystroke keeps the page
// clean (docs/payment-integrations.md).
func (s *Server) refuseClientSideEncryption(frameURL string) error {
	in, ok := s.integrationOf(frameURL)
	if !ok || !in.ClientSideEncryption {
		return nil
	}
	return agentvault.Errorf(agentvault.CodeClientSideEncryption,
		"The card cannot be filled here: this payment form (%s) encrypts the card inside its frame before it leaves the browser, so agentvault cannot put the real card in. Nothing was typed.", in.Name)
}

// checkFramesBeforeTyping resolves the frame of every field in a
// fill_checkout batch that holds a token (and the page itself for fields
// outside a frame) and refuses the batch when one of them is a
// client-side-encryption frame. A batch of literals only is not checked:
// nothing in it is substituted, so the encryption takes nothing from it. A
// frame that cannot be resolved yet is left to the fill (which waits for
// it); authorize checks the frame of every token again.
func (s *Server) checkFramesBeforeTyping(ss *Session, fields []FillField) error {
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.Frame] {
			continue
		}
		seen[f.Frame] = true
		u := ss.page.URL()
		if f.Frame != "" {
			fu, err := ss.page.FrameURL(f.Frame)
			if err != nil {
				continue
			}
			u = fu
		}
		if err := s.refuseClientSideEncryption(u); err != nil {
			return err
		}
	}
	return nil
}
