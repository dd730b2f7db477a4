package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/recipes"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file implements recipes.Store: the checkout recipe registry's
// published recipes and agents' submissions with their review. Mirrors
// store/sqlite's migration 4 (recipes_store.go). Each recipe is kept as its
// JSON; the columns beside it are what queries select on. Sort keys are
// COLLATE "C" so lists come out in SQLite's (byte) order whatever the
// database's locale.
const recipesMigration = `
CREATE TABLE recipes (
	id         text COLLATE "C" NOT NULL,
	kind       text COLLATE "C" NOT NULL,
	body       text NOT NULL,
	updated    bigint NOT NULL,
	updated_by text NOT NULL,
	PRIMARY KEY (kind, id)
);
CREATE TABLE recipe_submissions (
	id           text COLLATE "C" PRIMARY KEY,
	status       text NOT NULL CHECK (status IN ('pending', 'approved', 'merged', 'rejected', 'needs_human')),
	verdict      text NOT NULL,
	body         text NOT NULL,
	note         text NOT NULL,
	verification boolean NOT NULL,
	submitter    text NOT NULL,
	merge_into   text NOT NULL,
	created      bigint NOT NULL,
	updated      bigint NOT NULL,
	decided_by   text NOT NULL
);
CREATE INDEX recipe_submissions_budget ON recipe_submissions (submitter, created);
CREATE INDEX recipe_submissions_created ON recipe_submissions (created);
`

// PutRecipe implements recipes.Store.
func (s *Store) PutRecipe(ctx context.Context, p recipes.Published) error {
	body, err := json.Marshal(p.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	return dbErr(putRecipe(ctx, s.pool, p, body), "put recipe")
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func putRecipe(ctx context.Context, ex execer, p recipes.Published, body []byte) error {
	_, err := ex.Exec(ctx, `INSERT INTO recipes (id, kind, body, updated, updated_by) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body, updated = excluded.updated, updated_by = excluded.updated_by`,
		p.Recipe.ID, string(p.Recipe.Kind), string(body), nanos(p.Updated), p.UpdatedBy)
	return err
}

// GetRecipe implements recipes.Store.
func (s *Store) GetRecipe(ctx context.Context, kind recipes.Kind, id string) (recipes.Published, error) {
	p, err := scanRecipe(s.pool.QueryRow(ctx, `SELECT body, updated, updated_by FROM recipes WHERE kind = $1 AND id = $2`, string(kind), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, recipes.ErrNotFound
	}
	return p, dbErr(err, "get recipe")
}

// ListRecipes implements recipes.Store (by kind, then id).
func (s *Store) ListRecipes(ctx context.Context) ([]recipes.Published, error) {
	rows, err := s.pool.Query(ctx, `SELECT body, updated, updated_by FROM recipes ORDER BY kind, id`)
	out, err := collect(rows, err, scanRecipe)
	return out, dbErr(err, "list recipes")
}

func scanRecipe(row pgx.Row) (recipes.Published, error) {
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

// AddSubmission implements recipes.Store. An advisory lock on the
// submitter makes the count and the insert one step for every replica:
// concurrent submissions cannot overrun the budget.
func (s *Store) AddSubmission(ctx context.Context, sub recipes.Submission, b recipes.Budget) error {
	body, err := json.Marshal(sub.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	return dbErr(s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockKey(ctx, tx, "agentvault-recipe-budget:"+sub.Submitter); err != nil {
			return err
		}
		var n int
		var oldest *int64
		if err := tx.QueryRow(ctx, `SELECT count(*), min(created) FROM recipe_submissions WHERE submitter = $1 AND created > $2`,
			sub.Submitter, nanos(b.Since)).Scan(&n, &oldest); err != nil {
			return err
		}
		if b.Max > 0 && n >= b.Max {
			return agentvault.Wrap(agentvault.CodeRateLimited, &recipes.OldestError{Oldest: fromNull(oldest)}, "submission budget spent")
		}
		_, err := tx.Exec(ctx, `INSERT INTO recipe_submissions (`+submissionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			sub.ID, string(sub.Status), sub.Verdict, string(body), sub.Note, sub.VerificationRequested, sub.Submitter, sub.MergeInto,
			nanos(sub.Created), nanos(sub.Updated), sub.DecidedBy)
		return err
	}), "add submission")
}

// GetSubmission implements recipes.Store.
func (s *Store) GetSubmission(ctx context.Context, id string) (recipes.Submission, error) {
	sub, err := scanSubmission(s.pool.QueryRow(ctx, `SELECT `+submissionCols+` FROM recipe_submissions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, recipes.ErrNotFound
	}
	return sub, dbErr(err, "get submission")
}

// ListSubmissions implements recipes.Store: newest first, at most
// f.Limit (100 when not set), counted in SQL.
func (s *Store) ListSubmissions(ctx context.Context, f recipes.SubmissionFilter) ([]recipes.Submission, error) {
	q := `SELECT ` + submissionCols + ` FROM recipe_submissions`
	var args []any
	if len(f.Statuses) > 0 {
		ph := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			args = append(args, string(st))
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		q += ` WHERE status IN (` + strings.Join(ph, ", ") + `)`
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY created DESC, id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	out, err := collect(rows, err, scanSubmission)
	return out, dbErr(err, "list submissions")
}

// UpdateSubmission implements recipes.Store. The row lock makes two
// decisions racing on one submission (on any replica) land once; the
// publication shares the transaction.
func (s *Store) UpdateSubmission(ctx context.Context, sub recipes.Submission, from recipes.SubmissionStatus, p *recipes.Published) error {
	body, err := json.Marshal(sub.Recipe)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
	}
	var pubBody []byte
	if p != nil {
		if pubBody, err = json.Marshal(p.Recipe); err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "encode recipe")
		}
	}
	return dbErr(s.tx(ctx, func(tx pgx.Tx) error {
		var cur string
		err := tx.QueryRow(ctx, `SELECT status FROM recipe_submissions WHERE id = $1 FOR UPDATE`, sub.ID).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return recipes.ErrNotFound
		}
		if err != nil {
			return err
		}
		if cur != string(from) {
			return agentvault.Errorf(agentvault.CodeConflict, "submission %s is %s, not %s", sub.ID, cur, from)
		}
		if _, err := tx.Exec(ctx, `UPDATE recipe_submissions SET status = $1, verdict = $2, body = $3, note = $4, verification = $5,
	merge_into = $6, updated = $7, decided_by = $8 WHERE id = $9`,
			string(sub.Status), sub.Verdict, string(body), sub.Note, sub.VerificationRequested, sub.MergeInto, nanos(sub.Updated),
			sub.DecidedBy, sub.ID); err != nil {
			return err
		}
		if p != nil {
			return putRecipe(ctx, tx, *p, pubBody)
		}
		return nil
	}), "update submission")
}

func scanSubmission(row pgx.Row) (recipes.Submission, error) {
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
