package mcpserver

import (
	"context"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// With proxyd down, every tool that needs it would fail its own way: the
// catalog with the control API's error, open_page with the browser's
// proxy error, a fill after it waiting on fields of an error page. Instead
// each says the one thing to do, at once: once a call found proxyd not
// answering, later calls check that it accepts connections before they
// start, and a call failing the way a dead proxyd makes calls fail checks
// whether that is why.

// reachable is the control client's connection check (control.Client).
type reachable interface {
	Reachable(ctx context.Context) error
}

// needsNoProxyd are the tools that work without proxyd.
var needsNoProxyd = map[string]bool{"skill_find": true, "file_write": true, "get_pending_result": true}

// proxydCheck runs before a tool: while proxyd was last seen down, it
// answers the tool with the same message without running it.
func (s *Server) proxydCheck(ctx context.Context, tool string) error {
	if !s.proxydDown.Load() || needsNoProxyd[tool] {
		return nil
	}
	r, ok := s.cfg.Control.(reachable)
	if !ok {
		return nil
	}
	if err := r.Reachable(ctx); err != nil {
		return err
	}
	s.proxydDown.Store(false)
	return nil
}

// proxydExplain runs after a tool failed: when proxyd is what failed (the
// control API reached no replica, or a navigation or wait failed while
// nothing answers at the control address) the error says so.
func (s *Server) proxydExplain(ctx context.Context, tool string, err error) error {
	if control.IsUnreachable(err) {
		s.proxydDown.Store(true)
		return err
	}
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeUpstream, agentvault.CodeTimeout, agentvault.CodeFieldNotFound, agentvault.CodeUnknownTarget:
	default:
		return err
	}
	if needsNoProxyd[tool] {
		return err
	}
	r, ok := s.cfg.Control.(reachable)
	if !ok || ctx.Err() != nil {
		return err
	}
	if rerr := r.Reachable(context.WithoutCancel(ctx)); rerr != nil {
		s.proxydDown.Store(true)
		var fe *filledError
		if asFilled(err, &fe) {
			return withFilled(rerr, fe.filled[0], fe.filled[1])
		}
		return rerr
	}
	return err
}
