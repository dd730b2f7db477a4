package proxyd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// daemonMetrics are proxyd's series beyond the proxy mechanism's own
// (intercept.Metrics), on the same registry: what the owner's decisions and
// the agents' sessions look like to an on-call. Every label is from a
// closed set initialised at zero, so a rate() or an absent() alert works
// from the first scrape (docs/operations.md).
type daemonMetrics struct {
	authorize       *prometheus.CounterVec
	authorizeRefuse *prometheus.CounterVec
	decisions       *prometheus.CounterVec
	wait            *prometheus.HistogramVec
	sessions        prometheus.Gauge
	signInFailures  prometheus.Counter
	upstreamStatus  *prometheus.CounterVec
	statusBy        [5]prometheus.Counter // upstreamStatus by statusClasses, looked up once

	mu      sync.Mutex
	decided map[string]struct{} // approval ids already counted
}

// durableCounter is a store whose durable writer groups records (audit
// records, reservations) into shared commits and counts both.
type durableCounter interface {
	AuditCommits() (commits, records int64)
}

// registerDurable adds the store's group-commit counters: records per
// commit is how well the durable writer amortises its fsync under load.
func registerDurable(reg *prometheus.Registry, st any) {
	dc, ok := st.(durableCounter)
	if !ok {
		return
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentvault_store_durable_commits_total",
			Help: "Commits of the store's durable writer (each one holds one or more audit records or reservations)."},
			func() float64 { c, _ := dc.AuditCommits(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "agentvault_store_durable_records_total",
			Help: "Audit records and reservations the store's durable writer committed."},
			func() float64 { _, r := dc.AuditCommits(); return float64(r) }))
}

// Authorize outcomes.
const (
	authorizeGranted = "granted"
	authorizePending = "pending"
	authorizeRefused = "refused"
)

// authorizeCodes are the refusal codes authorize answers with; any other
// is counted as "other".
var authorizeCodes = []agentvault.Code{
	agentvault.CodeInternal, agentvault.CodeInvalidInput, agentvault.CodeNotFound, agentvault.CodeSealed,
	agentvault.CodeDestinationUnauthorized, agentvault.CodeScopeDenied, agentvault.CodeInsecureSite, agentvault.CodeInsecurePage,
	agentvault.CodePrivateDestination, agentvault.CodeMerchantBlocked, agentvault.CodeCardPaused,
	agentvault.CodeUnknownToken, agentvault.CodeTokenNotAllowed, agentvault.CodeTooManySessions,
	agentvault.CodeInvalidAPIKey, agentvault.CodeKeyRevoked, agentvault.CodeRateLimited,
	agentvault.CodeLimitReached, agentvault.CodeDailyLimit, agentvault.CodeMonthlyLimit,
	agentvault.CodeAmountUnknown, agentvault.CodeAmountUnconvertible, agentvault.CodeCheckoutTotalUnknown,
	agentvault.CodeApprovalDenied, agentvault.CodeApprovalExpired, agentvault.CodeCVVEntryRequired,
	agentvault.CodeSessionEnded, agentvault.CodeClientSideEncryption, agentvault.CodeAuditUnavailable,
}

var (
	approvalOutcomes = []string{string(owner.StatusApproved), string(owner.StatusDenied), string(owner.StatusExpired)}
	statusClasses    = []string{"1xx", "2xx", "3xx", "4xx", "5xx"}
)

func newDaemonMetrics(reg *prometheus.Registry, pendingCount func(context.Context) (int, error)) *daemonMetrics {
	d := &daemonMetrics{decided: map[string]struct{}{}}
	d.authorize = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_authorize_total",
		Help: "Authorize calls (an agent asking to fill a value), by outcome: granted, pending (the owner is asked), refused."}, []string{"outcome"})
	d.authorizeRefuse = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_authorize_refusals_total",
		Help: "Refused authorize calls, by code."}, []string{"code"})
	d.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_approval_decisions_total",
		Help: "Owner approvals that ended while an agent waited, by outcome: approved, denied, expired."}, []string{"outcome"})
	d.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentvault_approval_wait_seconds",
		Help:    "Time from an approval request to its end, by outcome.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 900, 1800}}, []string{"outcome"})
	d.sessions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentvault_sessions_open", Help: "Open proxy sessions."})
	d.signInFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentvault_dashboard_signin_failures_total",
		Help: "Dashboard sign-ins refused (wrong email or password, or rate limited)."})
	d.upstreamStatus = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_upstream_responses_total",
		Help: "Responses from upstream sites, by status class."}, []string{"class"})
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentvault_approvals_pending",
		Help: "Approvals waiting for the owner."}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := pendingCount(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	})
	reg.MustRegister(d.authorize, d.authorizeRefuse, d.decisions, d.wait, d.sessions, d.signInFailures, d.upstreamStatus, pending,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		buildInfo("proxyd"))
	for _, o := range []string{authorizeGranted, authorizePending, authorizeRefused} {
		d.authorize.WithLabelValues(o)
	}
	for _, c := range authorizeCodes {
		d.authorizeRefuse.WithLabelValues(string(c))
	}
	d.authorizeRefuse.WithLabelValues("other")
	for _, o := range approvalOutcomes {
		d.decisions.WithLabelValues(o)
		d.wait.WithLabelValues(o)
	}
	for i, c := range statusClasses {
		d.statusBy[i] = d.upstreamStatus.WithLabelValues(c)
	}
	return d
}

func (d *daemonMetrics) authorizeOutcome(err error) {
	if d == nil {
		return
	}
	switch {
	case err == nil:
		d.authorize.WithLabelValues(authorizeGranted).Inc()
	case agentvault.ErrorCode(err) == agentvault.CodeApprovalPending:
		d.authorize.WithLabelValues(authorizePending).Inc()
	default:
		d.authorize.WithLabelValues(authorizeRefused).Inc()
		code := agentvault.ErrorCode(err)
		label := "other"
		for _, c := range authorizeCodes {
			if c == code {
				label = string(c)
			}
		}
		d.authorizeRefuse.WithLabelValues(label).Inc()
	}
}

// decision counts an approval's end once, however many waits saw it.
func (d *daemonMetrics) decision(a owner.Approval, now time.Time) {
	if d == nil || !a.Done() {
		return
	}
	d.mu.Lock()
	if _, ok := d.decided[a.ID]; ok {
		d.mu.Unlock()
		return
	}
	if len(d.decided) > 10000 { // bounded: old ids are no longer polled
		d.decided = map[string]struct{}{}
	}
	d.decided[a.ID] = struct{}{}
	d.mu.Unlock()
	outcome := string(a.Status)
	switch a.Status {
	case owner.StatusApproved, owner.StatusDenied, owner.StatusExpired:
	default:
		return
	}
	end := a.DecidedAt
	if end.IsZero() {
		end = now
	}
	d.decisions.WithLabelValues(outcome).Inc()
	d.wait.WithLabelValues(outcome).Observe(end.Sub(a.Created).Seconds())
}

// buildInfo is agentvault_build_info{daemon,version,goversion} = 1.
func buildInfo(daemon string) prometheus.Collector {
	version, goversion := moduleVersion()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentvault_build_info",
		Help:        "Always 1; its labels say which build runs.",
		ConstLabels: prometheus.Labels{"daemon": daemon, "version": version, "goversion": goversion}})
	g.Set(1)
	return g
}

// observingHandler is proxyd's log handler: it passes records on, and reads
// the proxy's canonical request line (intercept logs one per request) for
// what the proxy mechanism does not count itself: the upstream status class
// of each forwarded request. It also keeps Chromium's normal proxy
// authentication challenge (a first CONNECT without credentials, answered
// 407, then retried with them) out of the warnings: that is the protocol
// (RFC 9110 §11.7.1), not a refusal.
type observingHandler struct {
	next    slog.Handler
	metrics *daemonMetrics
}

func (h *observingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *observingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "proxy request" {
		var decision, code, reason string
		status := 0
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "decision":
				decision = a.Value.String()
			case "status":
				status = int(a.Value.Int64())
			case "code":
				code = a.Value.String()
			case "reason":
				reason = a.Value.String()
			}
			return true
		})
		if h.metrics != nil && decision != "refused" && status >= 100 && status < 600 {
			h.metrics.statusBy[status/100-1].Inc()
		}
		if r.Level == slog.LevelWarn && code == string(agentvault.CodeProxyAuth) && reason == "proxy credentials required" {
			nr := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "decision" {
					a = slog.String("decision", "challenge")
				}
				nr.AddAttrs(a)
				return true
			})
			r = nr
		}
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *observingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &observingHandler{next: h.next.WithAttrs(as), metrics: h.metrics}
}

func (h *observingHandler) WithGroup(name string) slog.Handler {
	return &observingHandler{next: h.next.WithGroup(name), metrics: h.metrics}
}
