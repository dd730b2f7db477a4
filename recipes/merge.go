package recipes

import (
	"maps"
	"slices"
)

// SameStore finds the published recipe r is about, if any: the same id, or
// (for merchant and signup recipes) a host of the same store under another
// host name (StoreOf). Platform recipes match by id only.
func SameStore(published []Published, r Recipe) (Published, bool) {
	for _, p := range published {
		if p.Recipe.Kind == r.Kind && p.Recipe.ID == r.ID {
			return p, true
		}
	}
	if r.Kind != KindMerchant && r.Kind != KindSignup {
		return Published{}, false
	}
	stores := map[string]bool{}
	for _, h := range r.Hosts {
		stores[StoreOf(h)] = true
	}
	for _, p := range published {
		if p.Recipe.Kind != r.Kind {
			continue
		}
		for _, h := range p.Recipe.Hosts {
			if stores[StoreOf(h)] {
				return p, true
			}
		}
	}
	return Published{}, false
}

// Merge combines an accepted submission into the published recipe of the
// same store. The published recipe keeps its id; the hosts, gotchas and
// preconditions are the union (published first); the submission's
// overrides win per role, and its single-valued fields win where it sets
// them (the owner reviewed it). A verified recipe stays verified unless the
// submission is a dead end, and keeps its evidence unless the submission
// brings new evidence.
func Merge(published, in Recipe) Recipe {
	out := published
	out.Hosts = union(published.Hosts, in.Hosts)
	out.Gotchas = union(published.Gotchas, in.Gotchas)
	if published.Preconditions != nil || in.Preconditions != nil {
		out.Preconditions = union(published.Preconditions, in.Preconditions)
	}
	out.OwnerSteps = orList(in.OwnerSteps, published.OwnerSteps)
	out.Detection = orList(in.Detection, published.Detection)
	out.Steps = orList(in.Steps, published.Steps)
	if len(published.Overrides)+len(in.Overrides) > 0 {
		out.Overrides = maps.Clone(published.Overrides)
		if out.Overrides == nil {
			out.Overrides = map[string]Target{}
		}
		maps.Copy(out.Overrides, in.Overrides)
	}
	if len(published.Selectors)+len(in.Selectors) > 0 {
		out.Selectors = maps.Clone(published.Selectors)
		if out.Selectors == nil {
			out.Selectors = map[string]Target{}
		}
		maps.Copy(out.Selectors, in.Selectors)
	}
	for _, f := range []struct {
		dst *string
		v   string
	}{
		{&out.Platform, in.Platform}, {&out.CardSurface, in.CardSurface}, {&out.Notes, in.Notes},
		{&out.ExampleProductURL, in.ExampleProductURL}, {&out.IdentityProvider, in.IdentityProvider},
		{&out.Evidence, in.Evidence},
	} {
		if f.v != "" {
			*f.dst = f.v
		}
	}
	if in.Origins != nil {
		out.Origins = in.Origins
	}
	switch {
	case in.Status == StatusDeadEnd:
		out.Status, out.DeadEnd = StatusDeadEnd, in.DeadEnd
	case published.Status == StatusVerified && in.Status != StatusVerified:
		// stays verified
	default:
		// The submission reached further than the dead end said.
		out.Status, out.DeadEnd = in.Status, nil
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func orList(a, b []string) []string {
	if len(a) > 0 {
		return slices.Clone(a)
	}
	return slices.Clone(b)
}
