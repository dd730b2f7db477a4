package intercept

import (
	"testing"

	"github.com/agentvault/agentvault"
)

// series gathers m's registry into "name{label}" → value for one-label
// families and "name" for unlabelled ones.
func series(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			if ls := mt.GetLabel(); len(ls) == 1 {
				key += "{" + ls[0].GetValue() + "}"
			}
			if c := mt.GetCounter(); c != nil {
				out[key] = c.GetValue()
			}
		}
	}
	return out
}

// TestP15_RefusalSeriesClosedAndClassified: every refusal code series
// exists at zero from the start (a closed set: nothing more appears), an
// upstream failure counts as an upstream error and a credentials challenge
// as a challenge, never as refusals.
func TestP15_RefusalSeriesClosedAndClassified(t *testing.T) {
	m := NewMetrics()
	count := func(s map[string]float64, prefix string) (n int, sum float64) {
		for k, v := range s {
			if len(k) > len(prefix) && k[:len(prefix)] == prefix {
				n++
				sum += v
			}
		}
		return
	}
	start := series(t, m)
	if n, _ := count(start, "agentvault_proxy_refusals_total{"); n != len(knownCodes)+1 {
		t.Errorf("refusal series at start: %d, want %d", n, len(knownCodes)+1)
	}
	if n, _ := count(start, "agentvault_proxy_upstream_errors_total{"); n != len(upstreamCodes) {
		t.Errorf("upstream error series at start: %d", n)
	}
	for c := range knownCodes {
		if isUpstreamCode(c) {
			t.Errorf("%s is both an upstream code and a refusal code", c)
		}
	}
	m.refusal(agentvault.Errorf(agentvault.CodeUpstream, "destination does not resolve"))
	m.refusal(agentvault.Errorf(agentvault.CodeTimeout, "upstream timed out"))
	m.refusal(agentvault.Errorf(agentvault.CodeProxyAuth, msgCredentialsRequired))
	s := series(t, m)
	if _, sum := count(s, "agentvault_proxy_refusals_total{"); sum != 0 {
		t.Errorf("upstream failures or a challenge counted as refusals: %v", sum)
	}
	if s["agentvault_proxy_auth_challenges_total"] != 1 {
		t.Errorf("challenges = %v", s["agentvault_proxy_auth_challenges_total"])
	}
	if _, sum := count(s, "agentvault_proxy_upstream_errors_total{"); sum != 2 {
		t.Errorf("upstream errors = %v", sum)
	}
	m.refusal(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials rejected"))
	m.refusal(agentvault.Errorf(agentvault.Code("made_up_by_a_client"), "x"))
	s = series(t, m)
	if s["agentvault_proxy_refusals_total{proxy_auth_required}"] != 1 || s["agentvault_proxy_refusals_total{other}"] != 1 {
		t.Errorf("wrong credentials or an unknown code not counted as refusals: %v", s)
	}
	if n, _ := count(s, "agentvault_proxy_refusals_total{"); n != len(knownCodes)+1 {
		t.Errorf("refusal series grew to %d", n)
	}
}
