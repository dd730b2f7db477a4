package proxyd

import (
	"github.com/agentvault/agentvault/handoff"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// handoffHub returns the process's hand-off hub (package handoff), built on
// first use: the control API and the dashboard both serve from it.
func (m *Main) handoffHub() *handoff.Hub {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handoffs == nil {
		cfg := handoff.Config{Now: m.Now}
		cfg.SessionOpen = func(id string) bool { _, err := m.Broker.Get(id); return err == nil }
		cfg.ViewURL = func(id string) string {
			if m.Config.Dashboard.Domain != "" {
				return "https://" + m.Config.Dashboard.Domain + "/handoffs/" + id
			}
			if m.DashboardAddr != nil {
				return "https://" + m.DashboardAddr.String() + "/handoffs/" + id
			}
			return ""
		}
		if m.notify != nil {
			cfg.Announce = m.announceHandoff(m.notify, cfg.ViewURL)
		}
		m.handoffs = handoff.New(cfg)
	}
	return m.handoffs
}

var _ dashboard.Handoffs = (*handoff.Hub)(nil)
