package mcpserver

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/policy"
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
	if !ok {
		in, ok = s.proxyIntegration(frameURL)
	}
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
// it); authorize checks the frame of every token again. The frames it
// resolved are kept in frames for authorize (their URLs are read again
// there: a frame that navigated in between is seen at its new address).
func (s *Server) checkFramesBeforeTyping(ss *Session, fields []FillField, frames frameCache) error {
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.Frame] {
			continue
		}
		seen[f.Frame] = true
		u := ss.page.URL()
		if f.Frame != "" {
			fu, err := frames.url(ss, f.Frame)
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

// frameCache keeps, for one fill call, each frame selector's frame: the
// batch's check and each token's authorize look a frame up once between
// them. A frame whose iframe was removed meanwhile is looked up again.
type frameCache map[string]*browser.FrameHandle

// url is the current URL of the frame selector names.
func (c frameCache) url(ss *Session, selector string) (string, error) {
	if h := c[selector]; h != nil && !h.Gone() {
		return h.URL(), nil
	}
	h, err := ss.page.FrameOf(selector)
	if err != nil {
		return "", err
	}
	if c != nil {
		c[selector] = h
	}
	return h.URL(), nil
}

// integrationsSource is the part of the control API that lists the payment
// integrations proxyd recognises (control.Client implements it).
type integrationsSource interface {
	PaymentIntegrations(ctx context.Context) (json.RawMessage, error)
}

// integrationCache keeps the proxy's list for integrationsTTL. The owner's
// entries live in proxyd's config (policy.payment_integrations), so mcpd
// asks proxyd rather than reading a second copy.
type integrationCache struct {
	mu   sync.Mutex
	list *policy.Integrations
	at   time.Time
}

const integrationsTTL = 30 * time.Second

// proxyIntegration matches frameURL against the proxy's list: the owner's
// entries count the same as the shipped ones. A list that cannot be read
// leaves the shipped list (already checked) as the answer, and is asked for
// again on the next fill.
func (s *Server) proxyIntegration(frameURL string) (policy.Integration, bool) {
	src, ok := s.cfg.Control.(integrationsSource)
	if !ok || s.integrations == nil {
		return policy.Integration{}, false
	}
	c := s.integrations
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.list == nil || time.Since(c.at) > integrationsTTL {
		ctx, cancel := context.WithTimeout(s.stopCtx, 5*time.Second)
		defer cancel()
		raw, err := src.PaymentIntegrations(ctx)
		var list []policy.Integration
		if err == nil {
			err = json.Unmarshal(raw, &list)
		}
		var in *policy.Integrations
		if err == nil {
			in, err = policy.TrustedIntegrations(list)
		}
		if err != nil {
			s.log.Warn("payment integrations: could not read the proxy's list; the shipped list decides",
				"code", string(agentvault.ErrorCode(err)))
			return policy.Integration{}, false
		}
		c.list, c.at = in, time.Now()
	}
	return c.list.Match(frameURL)
}
