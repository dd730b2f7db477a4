// Package recipestest is the conformance suite every recipes.Store must
// pass (store/sqlite and store/postgres). It speaks only the recipes.Store interface; it
// must never reach into an implementation or assume one process.
package recipestest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/recipes"
)

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) recipes.Store) {
	t.Run("RecipesRoundTrip", func(t *testing.T) { roundTrip(t, open(t)) })
	t.Run("SubmissionsLifecycle", func(t *testing.T) { lifecycle(t, open(t)) })
	t.Run("UpdateIsCompareAndSwap", func(t *testing.T) { compareAndSwap(t, open(t)) })
	t.Run("BudgetHoldsUnderConcurrency", func(t *testing.T) { budget(t, open(t)) })
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func merchant(id string, hosts ...string) recipes.Recipe {
	return recipes.Recipe{ID: id, Kind: recipes.KindMerchant, Hosts: append([]string{id}, hosts...), Platform: "shopify",
		Status: recipes.StatusPartial, Gotchas: []string{"A cookie banner covers the first click."},
		Overrides: map[string]recipes.Target{"cardNumber": {Selector: `input[name="number"]`, Frame: `iframe[title="x"]`}}}
}

func roundTrip(t *testing.T, st recipes.Store) {
	ctx := context.Background()
	if _, err := st.GetRecipe(ctx, recipes.KindMerchant, "shop.example.com"); !errors.Is(err, recipes.ErrNotFound) {
		t.Fatalf("get of a missing recipe: %v, want ErrNotFound", err)
	}
	r := merchant("shop.example.com")
	if err := st.PutRecipe(ctx, recipes.Published{Recipe: r, Updated: t0, UpdatedBy: "owner:a"}); err != nil {
		t.Fatal(err)
	}
	// The same id under another kind is another recipe.
	sr := recipes.Recipe{ID: "shop.example.com", Kind: recipes.KindSignup, Hosts: []string{"shop.example.com"}, Status: recipes.StatusPartial}
	if err := st.PutRecipe(ctx, recipes.Published{Recipe: sr, Updated: t0, UpdatedBy: "owner:a"}); err != nil {
		t.Fatal(err)
	}
	r.Gotchas = append(r.Gotchas, "Pick a delivery slot first.")
	if err := st.PutRecipe(ctx, recipes.Published{Recipe: r, Updated: t0.Add(time.Hour), UpdatedBy: "owner:b"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRecipe(ctx, recipes.KindMerchant, "shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Recipe.Gotchas) != 2 || got.UpdatedBy != "owner:b" || !got.Updated.Equal(t0.Add(time.Hour)) ||
		got.Recipe.Overrides["cardNumber"].Frame != `iframe[title="x"]` {
		t.Errorf("recipe after replace = %+v", got)
	}
	all, err := st.ListRecipes(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list = %d recipes, %v; want 2", len(all), err)
	}
}

func sub(id, submitter string, created time.Time) recipes.Submission {
	return recipes.Submission{ID: id, Status: recipes.SubmissionPending, Recipe: merchant("shop.example.com"), Note: "reached the card form",
		Submitter: submitter, Created: created, Updated: created}
}

func lifecycle(t *testing.T, st recipes.Store) {
	ctx := context.Background()
	if _, err := st.GetSubmission(ctx, "rs_missing"); !errors.Is(err, recipes.ErrNotFound) {
		t.Fatalf("get of a missing submission: %v, want ErrNotFound", err)
	}
	s := sub("rs_1", "key_a", t0)
	s.VerificationRequested = true
	if err := st.AddSubmission(ctx, s, recipes.Budget{Max: 20, Since: t0.Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddSubmission(ctx, s, recipes.Budget{Max: 20, Since: t0.Add(-24 * time.Hour)}); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Errorf("second insert of one id: %v, want conflict", err)
	}
	got, err := st.GetSubmission(ctx, "rs_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != recipes.SubmissionPending || !got.VerificationRequested || got.Submitter != "key_a" || got.Recipe.ID != "shop.example.com" || !got.Created.Equal(t0) {
		t.Errorf("stored submission = %+v", got)
	}
	got.Status, got.Verdict, got.MergeInto = recipes.SubmissionNeedsHuman, "passed", "shop.example.com"
	if err := st.UpdateSubmission(ctx, got, recipes.SubmissionPending, nil); err != nil {
		t.Fatal(err)
	}
	got.Status, got.DecidedBy = recipes.SubmissionApproved, "owner:a"
	pub := &recipes.Published{Recipe: got.Recipe, Updated: t0, UpdatedBy: "owner:a"}
	if err := st.UpdateSubmission(ctx, got, recipes.SubmissionNeedsHuman, pub); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetRecipe(ctx, recipes.KindMerchant, "shop.example.com"); err != nil {
		t.Errorf("accepting did not publish: %v", err)
	}
	again, _ := st.GetSubmission(ctx, "rs_1")
	if again.Status != recipes.SubmissionApproved || again.Verdict != "passed" || again.DecidedBy != "owner:a" || again.MergeInto != "shop.example.com" {
		t.Errorf("after accept = %+v", again)
	}
	for i := 2; i <= 4; i++ {
		if err := st.AddSubmission(ctx, sub(fmt.Sprintf("rs_%d", i), "key_a", t0.Add(time.Duration(i)*time.Minute)), recipes.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.ListSubmissions(ctx, recipes.SubmissionFilter{Statuses: []recipes.SubmissionStatus{recipes.SubmissionPending}})
	if err != nil || len(list) != 3 || list[0].ID != "rs_4" {
		t.Errorf("pending list = %d (%v), want rs_4, rs_3, rs_2", len(list), err)
	}
	if list, _ := st.ListSubmissions(ctx, recipes.SubmissionFilter{Limit: 2}); len(list) != 2 {
		t.Errorf("limit 2 listed %d", len(list))
	}
	if err := st.UpdateSubmission(ctx, sub("rs_missing", "key_a", t0), recipes.SubmissionPending, nil); !errors.Is(err, recipes.ErrNotFound) {
		t.Errorf("update of a missing submission: %v, want ErrNotFound", err)
	}
}

// compareAndSwap: of two decisions racing on one submission, exactly one
// lands, and a refused one publishes nothing.
func compareAndSwap(t *testing.T, st recipes.Store) {
	ctx := context.Background()
	s := sub("rs_cas", "key_a", t0)
	s.Status = recipes.SubmissionNeedsHuman
	if err := st.AddSubmission(ctx, s, recipes.Budget{}); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := s
			d.Status = recipes.SubmissionRejected
			var p *recipes.Published
			if i%2 == 0 {
				d.Status = recipes.SubmissionApproved
				r := merchant(fmt.Sprintf("shop%d.example.com", i))
				p = &recipes.Published{Recipe: r, Updated: t0}
			}
			switch err := st.UpdateSubmission(ctx, d, recipes.SubmissionNeedsHuman, p); agentvault.ErrorCode(err) {
			case "":
				wins.Add(1)
			case agentvault.CodeConflict:
			default:
				t.Errorf("update: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d decisions landed on one submission, want 1", wins.Load())
	}
	final, _ := st.GetSubmission(ctx, "rs_cas")
	all, _ := st.ListRecipes(ctx)
	if (final.Status == recipes.SubmissionApproved) != (len(all) == 1) || len(all) > 1 {
		t.Errorf("final status %s with %d published recipes", final.Status, len(all))
	}
}

// budget: 30 concurrent submissions against a budget of 20 in the window:
// exactly 20 land, the rest are rate_limited naming the oldest counted
// one; another submitter and submissions before the window do not count.
func budget(t *testing.T, st recipes.Store) {
	ctx := context.Background()
	since := t0.Add(-24 * time.Hour)
	if err := st.AddSubmission(ctx, sub("rs_old", "key_a", since.Add(-time.Minute)), recipes.Budget{}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddSubmission(ctx, sub("rs_other", "key_b", t0), recipes.Budget{}); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.AddSubmission(ctx, sub(fmt.Sprintf("rs_b%d", i), "key_a", t0.Add(time.Duration(i+1)*time.Second)), recipes.Budget{Max: 20, Since: since})
			var oe *recipes.OldestError
			switch {
			case err == nil:
				wins.Add(1)
			case agentvault.ErrorCode(err) == agentvault.CodeRateLimited && errors.As(err, &oe):
				if oe.Oldest.Before(since) || oe.Oldest.After(t0.Add(31*time.Second)) {
					t.Errorf("oldest counted submission %v is outside the window", oe.Oldest)
				}
			default:
				t.Errorf("add: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 20 {
		t.Fatalf("%d submissions landed against a budget of 20", wins.Load())
	}
}
