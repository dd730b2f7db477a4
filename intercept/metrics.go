package intercept

import (
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus series, on their own registry. Every
// label value comes from a closed set (decisions, token kinds, error codes);
// never a host, token, session id or anything a client sent (P15). A nil
// *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	requests      *prometheus.CounterVec
	substitutions *prometheus.CounterVec
	scrubs        *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	upstreamErrs  *prometheus.CounterVec
	challenges    prometheus.Counter
	upstream      prometheus.Histogram
	added         prometheus.Histogram
	tunnels       prometheus.Gauge
	leafHits      prometheus.Counter
	leafMisses    prometheus.Counter

	requestBy      map[string]prometheus.Counter
	substitutionBy [5]prometheus.Counter // by kindIndex
	scrubBy        [5]prometheus.Counter
}

// Decisions recorded in requests_total.
const (
	DecisionForwarded   = "forwarded"
	DecisionSubstituted = "substituted"
	DecisionRefused     = "refused"
)

var knownCodes = map[agentvault.Code]bool{}

func init() {
	for _, c := range []agentvault.Code{
		agentvault.CodeInternal, agentvault.CodeInvalidInput, agentvault.CodeMalformedRequest,
		agentvault.CodeDestinationUnauthorized, agentvault.CodeScopeDenied, agentvault.CodeInsecureSite,
		agentvault.CodePrivateDestination, agentvault.CodeProxyLoop, agentvault.CodeUnknownToken,
		agentvault.CodeTokenNotAllowed, agentvault.CodeSubstitution, agentvault.CodeBodyTooLarge,
		agentvault.CodeTooManyTunnels, agentvault.CodeAuditUnavailable, agentvault.CodeProxyAuth, agentvault.CodeSealed,
		agentvault.CodeSessionEnded, agentvault.CodeNotFound, agentvault.CodeAmountMismatch, agentvault.CodeGrantExpired,
		agentvault.CodeGrantUsed, agentvault.CodeGrantInUse, agentvault.CodeCardPaused, agentvault.CodeKeyRevoked,
		agentvault.CodeRateLimited,
	} {
		knownCodes[c] = true
	}
}

// upstreamCodes are failures of the site or the network, not decisions of
// the proxy: they are counted in upstream_errors_total, never as refusals
// (an alert on refusals must not page for a merchant's outage).
var upstreamCodes = []agentvault.Code{agentvault.CodeUpstream, agentvault.CodeUpstreamTLS, agentvault.CodeTimeout}

func isUpstreamCode(c agentvault.Code) bool {
	for _, u := range upstreamCodes {
		if c == u {
			return true
		}
	}
	return false
}

// isChallenge reports the first CONNECT of a client that waits to be asked
// for proxy credentials (Chromium does: RFC 9110 §11.7.1, 407 then a retry
// with Proxy-Authorization). Wrong credentials remain a refusal.
func isChallenge(err error) bool {
	return agentvault.ErrorCode(err) == agentvault.CodeProxyAuth && agentvault.ErrorMessage(err) == msgCredentialsRequired
}

// msgCredentialsRequired is the refusal of a CONNECT without credentials.
const msgCredentialsRequired = "proxy credentials required"

func codeLabel(c agentvault.Code) string {
	if knownCodes[c] {
		return string(c)
	}
	return "other"
}

func kindLabel(k vault.Kind) string {
	switch k {
	case vault.KindCard, vault.KindLogin, vault.KindIdentity, vault.KindAddress:
		return string(k)
	}
	return "other"
}

// NewMetrics builds the series on a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_requests_total", Help: "Requests inside tunnels, by decision."}, []string{"decision"})
	m.substitutions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_substitutions_total", Help: "Stand-ins or tokens swapped for real values, by token kind."}, []string{"kind"})
	m.scrubs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_scrubs_total", Help: "Real values replaced in responses, by token kind."}, []string{"kind"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_refusals_total", Help: "Refused CONNECTs and requests, by code."}, []string{"code"})
	m.upstream = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentvault_proxy_upstream_latency_seconds", Help: "Time to upstream response headers.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)})
	m.added = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentvault_proxy_added_latency_seconds", Help: "Time spent in the proxy itself before sending upstream.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	m.tunnels = prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentvault_proxy_open_tunnels", Help: "Open MITM tunnels."})
	m.leafHits = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentvault_proxy_leaf_cache_hits_total", Help: "Leaf certificates served from cache."})
	m.leafMisses = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentvault_proxy_leaf_cache_misses_total", Help: "Leaf certificates signed."})
	m.upstreamErrs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_proxy_upstream_errors_total", Help: "Requests that failed upstream (connection, TLS, timeout), by code; not refusals."}, []string{"code"})
	m.challenges = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentvault_proxy_auth_challenges_total", Help: "CONNECTs without credentials answered 407 so the client retries with them (normal for browsers; not refusals)."})
	m.Registry.MustRegister(m.requests, m.substitutions, m.scrubs, m.refusals, m.upstreamErrs, m.challenges, m.upstream, m.added, m.tunnels, m.leafHits, m.leafMisses)
	// Every series of a closed label set exists from the start at zero, so
	// rate() and increase() see the first event (a series born at 1 hides it).
	for c := range knownCodes {
		m.refusals.WithLabelValues(string(c))
	}
	m.refusals.WithLabelValues("other")
	for _, c := range upstreamCodes {
		m.upstreamErrs.WithLabelValues(string(c))
	}
	// Every request counts one decision and most count kinds: the
	// counters of the closed label sets are bound once, so the hot path
	// does no label hashing.
	m.requestBy = map[string]prometheus.Counter{}
	for _, d := range []string{DecisionForwarded, DecisionSubstituted, DecisionRefused} {
		m.requestBy[d] = m.requests.WithLabelValues(d)
	}
	for _, k := range []vault.Kind{vault.KindCard, vault.KindLogin, vault.KindIdentity, vault.KindAddress} {
		m.substitutionBy[kindIndex(k)] = m.substitutions.WithLabelValues(kindLabel(k))
		m.scrubBy[kindIndex(k)] = m.scrubs.WithLabelValues(kindLabel(k))
	}
	return m
}

// kindIndex is k's slot in the pre-bound counters; 0 ("other") is left
// unbound (no item kind maps to it).
func kindIndex(k vault.Kind) int {
	switch k {
	case vault.KindCard:
		return 1
	case vault.KindLogin:
		return 2
	case vault.KindIdentity:
		return 3
	case vault.KindAddress:
		return 4
	}
	return 0
}

func (m *Metrics) request(decision string) {
	if m != nil {
		if c, ok := m.requestBy[decision]; ok {
			c.Inc()
			return
		}
		m.requests.WithLabelValues(decision).Inc()
	}
}

// refusal counts a failed request or CONNECT: an upstream failure or a
// credentials challenge is counted as what it is, not as a refusal.
func (m *Metrics) refusal(err error) {
	if m == nil {
		return
	}
	code := agentvault.ErrorCode(err)
	switch {
	case isUpstreamCode(code):
		m.upstreamErrs.WithLabelValues(string(code)).Inc()
	case isChallenge(err):
		m.challenges.Inc()
	default:
		m.refusals.WithLabelValues(codeLabel(code)).Inc()
	}
}

func (m *Metrics) substitution(k vault.Kind) {
	if m != nil {
		countKind(&m.substitutionBy, m.substitutions, k)
	}
}

func (m *Metrics) scrub(k vault.Kind) {
	if m != nil {
		countKind(&m.scrubBy, m.scrubs, k)
	}
}

// countKind adds one for kind k: to its counter resolved at start (by
// kindIndex) when there is one, else through the vector's label.
func countKind(by *[5]prometheus.Counter, vec *prometheus.CounterVec, k vault.Kind) {
	if c := by[kindIndex(k)]; c != nil {
		c.Inc()
		return
	}
	vec.WithLabelValues(kindLabel(k)).Inc()
}

func (m *Metrics) upstreamLatency(d time.Duration) {
	if m != nil {
		m.upstream.Observe(d.Seconds())
	}
}

func (m *Metrics) addedLatency(d time.Duration) {
	if m != nil {
		m.added.Observe(d.Seconds())
	}
}

func (m *Metrics) tunnel(delta float64) {
	if m != nil {
		m.tunnels.Add(delta)
	}
}

func (m *Metrics) leafHit() {
	if m != nil {
		m.leafHits.Inc()
	}
}

func (m *Metrics) leafMiss() {
	if m != nil {
		m.leafMisses.Inc()
	}
}
