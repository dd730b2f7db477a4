package intercept

import (
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestP15_RefusalSeriesClosedAndClassified: every refusal code series
// exists at zero from the start (a closed set, nothing more appears), an
// upstream failure counts as an upstream error and a credentials challenge
// as a challenge, never as refusals.
func TestP15_RefusalSeriesClosedAndClassified(t *testing.T) {
	m := NewMetrics()
	if n := testutil.CollectAndCount(m.refusals); n != len(knownCodes)+1 {
		t.Errorf("refusal series at start: %d, want %d", n, len(knownCodes)+1)
	}
	for c := range knownCodes {
		if isUpstreamCode(c) {
			t.Errorf("%s is both an upstream code and a refusal code", c)
		}
	}
	m.refusal(agentvault.Errorf(agentvault.CodeUpstream, "destination does not resolve"))
	m.refusal(agentvault.Errorf(agentvault.CodeTimeout, "upstream timed out"))
	m.refusal(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials required"))
	if got := testutil.ToFloat64(m.refusals.WithLabelValues(string(agentvault.CodeProxyAuth))); got != 0 {
		t.Errorf("a challenge counted as a refusal: %v", got)
	}
	if got := testutil.ToFloat64(m.challenges); got != 1 {
		t.Errorf("challenges = %v", got)
	}
	if got := testutil.ToFloat64(m.upstreamErrs.WithLabelValues(string(agentvault.CodeUpstream))) + testutil.ToFloat64(m.upstreamErrs.WithLabelValues(string(agentvault.CodeTimeout))); got != 2 {
		t.Errorf("upstream errors = %v", got)
	}
	m.refusal(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials rejected"))
	m.refusal(agentvault.Errorf(agentvault.Code("made_up_by_a_client"), "x"))
	if got := testutil.ToFloat64(m.refusals.WithLabelValues(string(agentvault.CodeProxyAuth))); got != 1 {
		t.Errorf("wrong credentials are a refusal: got %v", got)
	}
	if n := testutil.CollectAndCount(m.refusals); n != len(knownCodes)+1 {
		t.Errorf("refusal series grew to %d", n)
	}
	var sum float64
	for c := range knownCodes {
		sum += testutil.ToFloat64(m.refusals.WithLabelValues(string(c)))
	}
	if sum+testutil.ToFloat64(m.refusals.WithLabelValues("other")) != 2 {
		t.Errorf("refusals = %v, want 2", sum)
	}
}
