package proxyd

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/intercept"
)

// Residential egress required (egress.required, seed 004
// egress_unavailable): a new session is refused while the deployment has
// no upstream proxy or its proxy does not answer, so an agent's first
// open_page opens nothing rather than browse from the appliance's own
// address. The refusal carries a Retry-After (the control API's header,
// worded for the agent by mcpd). Sessions already open are not touched:
// their requests meet the proxy's own egress_unavailable and egress_lost.
const (
	// egressProbeTimeout bounds one look at the upstream proxy, which a
	// session's creation waits for.
	egressProbeTimeout = 2 * time.Second
	// egressProbeFresh is how long one look's answer stands: a burst of new
	// sessions asks the upstream proxy once.
	egressProbeFresh = 5 * time.Second
	// egressMissingRetryAfter is the wait named when there is no upstream
	// proxy at all: only the owner can fix that (a config change and a
	// restart), so the agent is not told to come back within seconds.
	egressMissingRetryAfter = 5 * time.Minute
)

// egressGate decides whether a new session may start.
type egressGate struct {
	required atomic.Bool
	// probe looks at the upstream proxy (intercept.Server.ProbeEgress);
	// nil: the deployment has none.
	probe func(context.Context, time.Duration) error
	now   func() time.Time
	log   *slog.Logger

	mu   sync.Mutex // held across a probe: a burst waits for its answer
	at   time.Time  // when last was found (zero: never)
	last error
}

func newEgressGate(required bool, probe func(context.Context, time.Duration) error, log *slog.Logger) *egressGate {
	g := &egressGate{probe: probe, now: time.Now, log: log}
	g.required.Store(required)
	if required && probe == nil {
		log.Warn("egress.required is set without egress.upstream_proxy: every new session is refused egress_unavailable until the owner sets one and restarts proxyd")
	}
	return g
}

// setRequired applies a reloaded egress.required (the upstream proxy
// itself needs a restart).
func (g *egressGate) setRequired(required bool) {
	if g != nil {
		g.required.Store(required)
	}
}

// check is nil when a session may start, else egress_unavailable with the
// wait before trying again.
func (g *egressGate) check(ctx context.Context) error {
	if g == nil || !g.required.Load() {
		return nil
	}
	if g.probe == nil {
		return control.RetryAfter(agentvault.Errorf(agentvault.CodeEgressUnavailable,
			"No session was started: this deployment requires residential egress and has none configured, so nothing was opened. The owner sets egress.upstream_proxy in proxyd's config and restarts it."),
			egressMissingRetryAfter)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() || g.now().Sub(g.at) >= egressProbeFresh {
		// The caller going away does not end the look: its answer
		// serves the calls behind it.
		err := g.probe(context.WithoutCancel(ctx), egressProbeTimeout)
		switch {
		case err != nil && (g.last == nil || g.at.IsZero()):
			g.log.Warn("the upstream egress proxy is not answering: new sessions are refused egress_unavailable",
				slog.String("code", string(agentvault.CodeEgressUnavailable)))
		case err == nil && g.last != nil:
			g.log.Info("the upstream egress proxy answers again: new sessions start")
		}
		g.at, g.last = g.now(), err
	}
	if g.last != nil {
		return control.RetryAfter(agentvault.Wrap(agentvault.CodeEgressUnavailable, g.last,
			"No session was started: this deployment requires residential egress and its upstream proxy is not answering, so nothing was opened. If it keeps failing, the owner checks egress.upstream_proxy."),
			intercept.EgressRetryAfter)
	}
	return nil
}
