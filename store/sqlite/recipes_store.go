package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/recipes"
)

// PutRecipe inserts or replaces a published recipe.
func (s *Store) PutRecipe(ctx context.Context, p recipes.Published) error {
	return dbErr(s.tx(ctx, func(tx *sql.Tx) error { return putRecipe(ctx, tx, p) }), "put recipe")
}

func putRecipe(ctx context.Context, tx *sql.Tx, p recipes.Published) error {
	body, err := json.Marshal(p.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO recipes (id, kind, body, updated, updated_by) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, updated = excluded.updated, updated_by = excluded.updated_by`,
		p.Recipe.ID, string(p.Recipe.Kind), string(body), nanos(p.Updated), p.UpdatedBy)
	return err
}

// GetRecipe returns a published recipe, or recipes.ErrNotFound.
func (s *Store) GetRecipe(ctx context.Context, kind recipes.Kind, id string) (recipes.Published, error) {
	row := s.db.QueryRowContext(ctx, `SELECT body, updated, updated_by FROM recipes WHERE kind = ? AND id = ?`, string(kind), id)
	p, err := scanRecipe(row)
	if errors.Is(err, sql.ErrNoRows) {
		return p, recipes.ErrNotFound
	}
	return p, dbErr(err, "get recipe")
}

// ListRecipes returns every published recipe by kind and id.
func (s *Store) ListRecipes(ctx context.Context) ([]recipes.Published, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body, updated, updated_by FROM recipes ORDER BY kind, id`)
	return collect(rows, err, "list recipes", scanRecipe)
}

func scanRecipe(row interface{ Scan(...any) error }) (recipes.Published, error) {
	var p recipes.Published
	var body string
	var updated int64
	if err := row.Scan(&body, &updated, &p.UpdatedBy); err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(body), &p.Recipe); err != nil {
		return p, agentvault.Wrap(agentvault.CodeInternal, err, "recipe store: a stored recipe does not decode")
	}
	p.Updated = fromNanos(updated)
	return p, nil
}

const submissionCols = `id, status, verdict, body, note, verification, submitter, merge_into, created, updated, decided_by`

// AddSubmission stores a submission unless its submitter's budget is
// spent; the count and the insert share one IMMEDIATE transaction, so
// concurrent submissions cannot overrun the budget.
func (s *Store) AddSubmission(ctx context.Context, sub recipes.Submission, b recipes.Budget) error {
	body, err := json.Marshal(sub.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	return dbErr(s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		var oldest sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT count(*), min(created) FROM recipe_submissions WHERE submitter = ? AND created > ?`,
			sub.Submitter, nanos(b.Since)).Scan(&n, &oldest); err != nil {
			return err
		}
		if b.Max > 0 && n >= b.Max {
			return agentvault.Wrap(agentvault.CodeRateLimited, &recipes.OldestError{Oldest: fromNanos(oldest.Int64)}, "submission budget spent")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO recipe_submissions (`+submissionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sub.ID, string(sub.Status), sub.Verdict, string(body), sub.Note, sub.VerificationRequested, sub.Submitter, sub.MergeInto,
			nanos(sub.Created), nanos(sub.Updated), sub.DecidedBy)
		return err
	}), "add submission")
}

// GetSubmission returns a submission, or recipes.ErrNotFound.
func (s *Store) GetSubmission(ctx context.Context, id string) (recipes.Submission, error) {
	sub, err := scanSubmission(s.db.QueryRowContext(ctx, `SELECT `+submissionCols+` FROM recipe_submissions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sub, recipes.ErrNotFound
	}
	return sub, dbErr(err, "get submission")
}

// ListSubmissions returns submissions newest first.
func (s *Store) ListSubmissions(ctx context.Context, f recipes.SubmissionFilter) ([]recipes.Submission, error) {
	q := `SELECT ` + submissionCols + ` FROM recipe_submissions`
	var args []any
	if len(f.Statuses) > 0 {
		q += ` WHERE status IN (?` + strings.Repeat(", ?", len(f.Statuses)-1) + `)`
		for _, st := range f.Statuses {
			args = append(args, string(st))
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY created DESC, id LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list submissions", scanSubmission)
}

// UpdateSubmission replaces a submission still in state from and, in the
// same transaction, publishes p when it is not nil.
func (s *Store) UpdateSubmission(ctx context.Context, sub recipes.Submission, from recipes.SubmissionStatus, p *recipes.Published) error {
	body, err := json.Marshal(sub.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	return dbErr(s.tx(ctx, func(tx *sql.Tx) error {
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT status FROM recipe_submissions WHERE id = ?`, sub.ID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return recipes.ErrNotFound
		}
		if err != nil {
			return err
		}
		if cur != string(from) {
			return agentvault.Errorf(agentvault.CodeConflict, "submission %s is %s, not %s", sub.ID, cur, from)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE recipe_submissions SET status = ?, verdict = ?, body = ?, note = ?, verification = ?,
			merge_into = ?, updated = ?, decided_by = ? WHERE id = ?`,
			string(sub.Status), sub.Verdict, string(body), sub.Note, sub.VerificationRequested, sub.MergeInto, nanos(sub.Updated),
			sub.DecidedBy, sub.ID); err != nil {
			return err
		}
		if p != nil {
			return putRecipe(ctx, tx, *p)
		}
		return nil
	}), "update submission")
}

func scanSubmission(row interface{ Scan(...any) error }) (recipes.Submission, error) {
	var sub recipes.Submission
	var status, body string
	var created, updated int64
	if err := row.Scan(&sub.ID, &status, &sub.Verdict, &body, &sub.Note, &sub.VerificationRequested, &sub.Submitter,
		&sub.MergeInto, &created, &updated, &sub.DecidedBy); err != nil {
		return sub, err
	}
	if err := json.Unmarshal([]byte(body), &sub.Recipe); err != nil {
		return sub, agentvault.Wrap(agentvault.CodeInternal, err, "recipe store: a stored submission does not decode")
	}
	sub.Status, sub.Created, sub.Updated = recipes.SubmissionStatus(status), fromNanos(created), fromNanos(updated)
	return sub, nil
}

var _ recipes.Store = (*Store)(nil)
