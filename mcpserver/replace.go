package mcpserver

import (
	"context"
	"fmt"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// A run's proxy session can die under it: proxyd closed it (its idle or age
// limit, a restart) while the agent's task goes on. open_page then starts a
// new proxy session for the same run (seed 004, get_run_report "After a
// restart"), and the run's report is split into segments: the final
// reports of the replaced proxy sessions that could still be read
// (earlierReports), then the current one. coversWholeRun is false from
// then on.

const (
	earlierReportsNote = "Earlier proxy sessions in this run, replaced partway through: open_page started a new proxy session after the old one's connection died. " +
		"The top-level fields describe only the current proxy session. Check every segment before telling anyone nothing was charged: " +
		"card in any segment's filledFieldKinds, or confirmationDetected true in any segment, holds for the whole run."
	replacedNote = "open_page had to start a new proxy session partway through this run, so these numbers cover only what happened after that. " +
		"A short record is not evidence of a quiet run."
	currentReportNote = "No report for the current proxy session: it could not be read. The earlier segments still count. " +
		"Do NOT read this as nothing having been filled since the restart."
)

// replaceDead starts a new proxy session for ss when its current one has
// ended (proxyEnded), keeping the old one's final report. ss.mu is held. It
// reports whether it replaced.
func (s *Server) replaceDead(ctx context.Context, ss *Session) (bool, error) {
	e := s.proxyEnded(ctx, ss)
	if !e.ended {
		return false, nil
	}
	return true, s.replaceProxy(ctx, ss, e)
}

// endedCheck is proxyd's answer about a run's proxy session: ended, with its
// final report when it could be read (readErr otherwise).
type endedCheck struct {
	ended   bool
	report  control.Report
	readErr error
}

// proxyEnded asks proxyd whether ss's proxy session has ended: it answers
// its final report marked ended, or no longer knows it. A proxyd that
// cannot say counts as alive. It reads only ss.ctl's id, so it may run
// while the caller holds ss.mu and uses the page.
func (s *Server) proxyEnded(ctx context.Context, ss *Session) endedCheck {
	ss.events.Wait()
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	rep, err := s.cfg.Control.Report(rctx, ss.ctl.ID)
	cancel()
	switch {
	case err == nil && rep.Ended:
		return endedCheck{ended: true, report: rep}
	case err != nil && agentvault.ErrorCode(err) == agentvault.CodeNotFound:
		return endedCheck{ended: true, readErr: err}
	}
	return endedCheck{}
}

// replaceProxy starts a new proxy session for ss, whose current one ended
// (e), and closes the browser context that carried the old one's
// credential. ss.mu is held.
func (s *Server) replaceProxy(ctx context.Context, ss *Session, e endedCheck) error {
	cs, cerr := s.cfg.Control.CreateSession(ctx, s.apiKeyOf(ctx))
	if cerr != nil {
		return cerr
	}
	if ss.page != nil {
		// The browser context carries the dead session's proxy
		// credential: a new one goes with the new proxy session.
		if perr := ss.page.Close(); perr != nil {
			s.log.Warn("replaced proxy session's browser context did not close cleanly")
		}
		ss.page = nil
	}
	ss.seg.Lock()
	ss.replaced++
	if e.readErr == nil {
		ss.earlier = append(ss.earlier, normReport(e.report))
	}
	ss.ctl = cs
	ss.seg.Unlock()
	s.log.Info("proxy session replaced", "replaced", ss.replaced)
	return nil
}

// segments is what a run's report needs besides the current proxy
// session's: how often it was replaced and the earlier reports kept.
func (ss *Session) segments() (replaced int, earlier []control.Report) {
	ss.seg.Lock()
	defer ss.seg.Unlock()
	return ss.replaced, append([]control.Report(nil), ss.earlier...)
}

func replacedNoteOf(replaced, kept int) string {
	if lost := replaced - kept; lost > 0 {
		return replacedNote + fmt.Sprintf(" The record of %s could not be read.", plural(lost, "earlier proxy session", "earlier proxy sessions"))
	}
	return replacedNote
}

// writesOf is every credential write the earlier segments list.
func writesOf(earlier []control.Report) []string {
	var out []string
	for _, r := range earlier {
		out = append(out, r.CredentialWrites...)
	}
	return out
}

// splitReport is get_run_report's and close_session's answer when the
// current proxy session could not be read but earlier segments were kept.
type splitReport struct {
	EarlierReports     []control.Report `json:"earlierReports"`
	EarlierReportsNote string           `json:"earlierReportsNote"`
	CurrentReport      *control.Report  `json:"currentReport"`
	CoversWholeRun     bool             `json:"coversWholeRun"`
	CurrentReportNote  string           `json:"currentReportNote"`
	CredentialWrites   []string         `json:"credentialWrites,omitempty"`
}
