package recipes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
)

// Defaults of the registry's rules (seed 004).
const (
	// DefaultPerDay is the submissions one API key may make in any 24
	// hours.
	DefaultPerDay = 20
	// Window is the span the per-day budget counts over.
	Window = 24 * time.Hour
	// DefaultScreenWait is how long a submission waits for its screening
	// before it answers pending.
	DefaultScreenWait = 45 * time.Second
	// screenTimeout bounds one screening run.
	screenTimeout = 2 * time.Minute
)

// Config wires a Registry.
type Config struct {
	Store Store
	Now   func() time.Time
	// PerDay is the per-key budget in any 24 hours (default 20).
	PerDay int
	// ScreenWait is how long Submit waits for screening (default 45 s).
	ScreenWait time.Duration
	// Screen is an extra screening step run after the registry's own; an
	// error with a public message rejects the submission with that
	// message as its verdict. Tests use it to make screening slow.
	Screen func(ctx context.Context, s Submission) error
}

// Registry is the checkout recipe registry: lookups, agent submissions and
// their screening, and the owner's review. It is safe for concurrent use.
type Registry struct {
	st         Store
	now        func() time.Time
	perDay     int
	screenWait time.Duration
	screen     func(ctx context.Context, s Submission) error

	mu       sync.Mutex
	inFlight map[string]chan struct{} // screenings running in this process
	wg       sync.WaitGroup
}

// New builds a registry over cfg.Store.
func New(cfg Config) (*Registry, error) {
	if cfg.Store == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "recipes: Store is required")
	}
	g := &Registry{st: cfg.Store, now: cfg.Now, perDay: cfg.PerDay, screenWait: cfg.ScreenWait, screen: cfg.Screen,
		inFlight: map[string]chan struct{}{}}
	if g.now == nil {
		g.now = time.Now
	}
	if g.perDay <= 0 {
		g.perDay = DefaultPerDay
	}
	if g.screenWait <= 0 {
		g.screenWait = DefaultScreenWait
	}
	return g, nil
}

// Close waits for screenings in flight.
func (g *Registry) Close() { g.wg.Wait() }

// Lookup is the answer to a lookup: four slots, each nil (JSON null) when
// the registry has nothing for the host.
type Lookup struct {
	Merchant       *Recipe `json:"merchant"`
	Platform       *Recipe `json:"platform"`
	Signup         *Recipe `json:"signup"`
	SignupPlatform *Recipe `json:"signupPlatform"`
}

// Lookup answers for a page: pageURL is stripped (StripURL) first, and
// only its host is looked up. Only published recipes are served: a
// submission is invisible until the owner accepts it.
func (g *Registry) Lookup(ctx context.Context, pageURL string) (Lookup, error) {
	var out Lookup
	host := HostOf(StripURL(pageURL))
	if host == "" {
		return out, nil
	}
	pub, err := g.st.ListRecipes(ctx)
	if err != nil {
		return out, err
	}
	all := make([]Recipe, 0, len(pub)+3)
	for _, p := range pub {
		all = append(all, p.Recipe)
	}
	for _, s := range Shipped() {
		if _, ok := find(all, s.Kind, s.ID); !ok {
			all = append(all, s)
		}
	}
	out.Merchant = forHost(all, KindMerchant, host)
	if m := out.Merchant; m != nil {
		for _, id := range []string{m.Platform, m.CardSurface} {
			if r, ok := find(all, KindPlatform, id); ok && id != "" {
				out.Platform = &r
				break
			}
		}
	}
	out.Signup = forHost(all, KindSignup, host)
	if s := out.Signup; s != nil && s.IdentityProvider != "" {
		if r, ok := find(all, KindSignupPlatform, s.IdentityProvider); ok {
			out.SignupPlatform = &r
		}
	}
	return out, nil
}

func find(all []Recipe, k Kind, id string) (Recipe, bool) {
	for _, r := range all {
		if r.Kind == k && r.ID == id {
			return r, true
		}
	}
	return Recipe{}, false
}

// forHost is the recipe of kind k that names host, or failing that one of
// the same store.
func forHost(all []Recipe, k Kind, host string) *Recipe {
	var sameStore *Recipe
	store := StoreOf(host)
	for i := range all {
		r := &all[i]
		if r.Kind != k {
			continue
		}
		for _, h := range r.Hosts {
			if h == host {
				return r
			}
			if sameStore == nil && StoreOf(h) == store {
				sameStore = r
			}
		}
	}
	return sameStore
}

// SubmitArgs is one submission.
type SubmitArgs struct {
	// Recipe is the recipe body as the agent sent it (JSON).
	Recipe                []byte
	Note                  string
	VerificationRequested bool
	// Submitter is the API key id the budget is counted against.
	Submitter string
}

// Submit checks a submission against the registry's rules (a refusal is
// invalid_recipe and stores nothing), spends one of the submitter's 20 in
// any 24 hours (rate_limited when none is left), and screens it, waiting up
// to ScreenWait for the verdict. A screening still running answers pending:
// poll Submission with the id.
func (g *Registry) Submit(ctx context.Context, a SubmitArgs) (Submission, error) {
	r, err := Decode(a.Recipe)
	if err != nil {
		return Submission{}, err
	}
	if r, err = Check(r, CheckArgs{}); err != nil {
		return Submission{}, err
	}
	if err := CheckNote(a.Note, a.VerificationRequested); err != nil {
		return Submission{}, err
	}
	if a.Submitter == "" {
		return Submission{}, agentvault.Errorf(agentvault.CodeUnauthorized, "a submission needs an API key")
	}
	now := g.now().UTC()
	s := Submission{ID: newID(), Status: SubmissionPending, Recipe: r, Note: a.Note, VerificationRequested: a.VerificationRequested,
		Submitter: a.Submitter, Created: now, Updated: now}
	if err := g.st.AddSubmission(ctx, s, Budget{Max: g.perDay, Since: now.Add(-Window)}); err != nil {
		var oe *OldestError
		if errors.As(err, &oe) {
			wait := max(oe.Oldest.Add(Window).Sub(now), time.Second)
			return Submission{}, &policy.RateLimitError{RetryAfter: wait, Err: agentvault.Wrap(agentvault.CodeRateLimited, err,
				"%d recipe submissions in 24 hours is the limit for this key: submit again in %s, when the oldest of them is 24 hours old", g.perDay, roundUp(wait))}
		}
		return Submission{}, err
	}
	done := g.startScreening(s)
	t := time.NewTimer(g.screenWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	return g.st.GetSubmission(context.WithoutCancel(ctx), s.ID)
}

// Submission reads a submission; while it is pending it waits up to wait
// for the screening to finish. A pending submission whose screening is not
// running (the process restarted) is screened again.
func (g *Registry) Submission(ctx context.Context, id string, wait time.Duration) (Submission, error) {
	s, err := g.st.GetSubmission(ctx, id)
	if err != nil || s.Status != SubmissionPending {
		return s, err
	}
	done := g.startScreening(s)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return g.st.GetSubmission(context.WithoutCancel(ctx), id)
}

// startScreening runs the screening of s once per process and returns a
// channel closed when it ends.
func (g *Registry) startScreening(s Submission) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch, ok := g.inFlight[s.ID]; ok {
		return ch
	}
	ch := make(chan struct{})
	g.inFlight[s.ID] = ch
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer func() {
			g.mu.Lock()
			delete(g.inFlight, s.ID)
			g.mu.Unlock()
			close(ch)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), screenTimeout)
		defer cancel()
		_ = g.screenOnce(ctx, s)
	}()
	return ch
}

// screenOnce is the screening: the extra step, then whether the
// submission adds anything to the published recipe of its store. It ends in
// needs_human (the owner decides) or rejected (the verdict says why).
func (g *Registry) screenOnce(ctx context.Context, s Submission) error {
	status, verdict := SubmissionNeedsHuman, ""
	if g.screen != nil {
		if err := g.screen(ctx, s); err != nil {
			if ctx.Err() != nil {
				return err // leave it pending; a later poll screens again
			}
			status, verdict = SubmissionRejected, "Rejected by screening: "+agentvault.ErrorMessage(err)
		}
	}
	if status == SubmissionNeedsHuman {
		pub, err := g.st.ListRecipes(ctx)
		if err != nil {
			return err
		}
		if p, ok := SameStore(pub, s.Recipe); ok {
			s.MergeInto = p.Recipe.ID
			if reflect.DeepEqual(Merge(p.Recipe, s.Recipe), p.Recipe) && !s.VerificationRequested {
				status, verdict = SubmissionRejected, fmt.Sprintf("Rejected by screening: duplicate, the published recipe %s already says all of this.", p.Recipe.ID)
			} else {
				verdict = fmt.Sprintf("Passed screening. The owner reviews it before other agents see it; accepted, it is combined with the recipe %s of the same store.", p.Recipe.ID)
			}
		} else {
			verdict = "Passed screening. The owner reviews it before other agents see it."
		}
	}
	s.Status, s.Verdict, s.Updated = status, verdict, g.now().UTC()
	err := g.st.UpdateSubmission(ctx, s, SubmissionPending, nil)
	if agentvault.ErrorCode(err) == agentvault.CodeConflict {
		return nil // decided meanwhile (by the owner, or another screening)
	}
	return err
}

// Submissions lists submissions for the owner.
func (g *Registry) Submissions(ctx context.Context, f SubmissionFilter) ([]Submission, error) {
	return g.st.ListSubmissions(ctx, f)
}

// Published lists the stored recipes (not the shipped ones).
func (g *Registry) Published(ctx context.Context) ([]Published, error) { return g.st.ListRecipes(ctx) }

// AcceptArgs is the owner's acceptance of a submission.
type AcceptArgs struct {
	ID string
	By string
	// Verified publishes the recipe as verified; with a submission that
	// asked for verification its note becomes the evidence, word for word.
	Verified bool
}

// Accept publishes a submission that passed screening, combined with the
// recipe of its store when there is one. From then on lookups serve it.
func (g *Registry) Accept(ctx context.Context, a AcceptArgs) (Submission, error) {
	s, err := g.reviewable(ctx, a.ID)
	if err != nil {
		return s, err
	}
	r := s.Recipe
	if a.Verified {
		if r.Status == StatusDeadEnd {
			return s, agentvault.Errorf(agentvault.CodeInvalidInput, "a dead-end recipe cannot be verified")
		}
		r.Status = StatusVerified
		if s.VerificationRequested {
			r.Evidence = s.Note
		}
	}
	if r, err = Check(r, CheckArgs{ByOwner: true}); err != nil {
		return s, err
	}
	pub, err := g.st.ListRecipes(ctx)
	if err != nil {
		return s, err
	}
	s.Status, s.Verdict = SubmissionApproved, "Accepted by the owner; the recipe is live."
	if p, ok := SameStore(pub, r); ok {
		r = Merge(p.Recipe, r)
		s.Status, s.MergeInto = SubmissionMerged, p.Recipe.ID
		s.Verdict = fmt.Sprintf("Accepted by the owner and combined with the recipe %s of the same store.", p.Recipe.ID)
	}
	now := g.now().UTC()
	s.Updated, s.DecidedBy = now, a.By
	if err := g.st.UpdateSubmission(ctx, s, SubmissionNeedsHuman, &Published{Recipe: r, Updated: now, UpdatedBy: a.By}); err != nil {
		return s, err
	}
	return s, nil
}

// Reject closes a submission with the rule it broke, in the owner's words.
func (g *Registry) Reject(ctx context.Context, id, by, rule string) (Submission, error) {
	s, err := g.reviewable(ctx, id)
	if err != nil {
		return s, err
	}
	rule = strings.TrimSpace(rule)
	if rule == "" {
		return s, agentvault.Errorf(agentvault.CodeInvalidInput, "say which rule the submission broke")
	}
	if len(rule) > maxLine {
		rule = rule[:maxLine]
	}
	s.Status, s.Verdict, s.Updated, s.DecidedBy = SubmissionRejected, "Rejected by the owner: "+rule, g.now().UTC(), by
	return s, g.st.UpdateSubmission(ctx, s, SubmissionNeedsHuman, nil)
}

// Edit replaces the recipe of a submission under review with the owner's
// version (checked with the owner's rights). It stays under review.
func (g *Registry) Edit(ctx context.Context, id, by string, raw []byte) (Submission, error) {
	s, err := g.reviewable(ctx, id)
	if err != nil {
		return s, err
	}
	r, err := Decode(raw)
	if err != nil {
		return s, err
	}
	if r, err = Check(r, CheckArgs{ByOwner: true}); err != nil {
		return s, err
	}
	s.Recipe, s.Updated = r, g.now().UTC()
	s.Verdict = "Edited by the owner; waiting for the owner's decision."
	return s, g.st.UpdateSubmission(ctx, s, SubmissionNeedsHuman, nil)
}

func (g *Registry) reviewable(ctx context.Context, id string) (Submission, error) {
	s, err := g.st.GetSubmission(ctx, id)
	if err != nil {
		return s, err
	}
	if s.Status != SubmissionNeedsHuman {
		return s, agentvault.Errorf(agentvault.CodeConflict, "submission %s is %s, not waiting for a review", s.ID, s.Status)
	}
	return s, nil
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "rs_" + hex.EncodeToString(b)
}

func roundUp(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Second)
	}
	return (d + time.Minute - 1).Truncate(time.Minute)
}
