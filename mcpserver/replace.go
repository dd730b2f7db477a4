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
// ended (proxyd answers its final report marked ended, or no longer knows
// it), keeping the old one's final report. ss.mu is held. It reports
// whether it replaced.
func (s *Server) replaceDead(ctx context.Context, ss *Session) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	rep, err := s.cfg.Control.Report(rctx, ss.ctl.ID)
	cancel()
	switch {
	case err == nil && rep.Ended:
	case err != nil && agentvault.ErrorCode(err) == agentvault.CodeNotFound:
	default:
		// Alive, or proxyd could not say: carry on with this one.
		return false, nil
	}
	cs, cerr := s.cfg.Control.CreateSession(ctx, s.apiKeyOf(ctx))
	if cerr != nil {
		return false, cerr
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
	if err == nil {
		ss.earlier = append(ss.earlier, normReport(rep))
	}
	ss.ctl = cs
	ss.seg.Unlock()
	s.log.Info("proxy session replaced", "replaced", ss.replaced)
	return true, nil
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
