package lease

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// An answer whose commit fails is no answer: a take or renewal that
// returned its row and then failed to commit must not pass for one,
// whether sent as it is or behind remoteApply in a pipeline. The commit
// fails here on a deferred unique constraint, checked only then.
func TestAnAnswerWhoseCommitFailsIsAnError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgx.Identifier{pgtest.Table(t, pool)}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (n integer UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO ` + table + ` VALUES (1), (1) RETURNING n`
	type answer struct{ N int }

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for name, db := range map[string]querier{"as it is": pool, "behind remoteApply": &replicaSession{conn: conn}} {
		got, err := queryOne[answer](ctx, db, insert, nil)
		if pgerr.SQLState(err) != pgerr.CodeUniqueViolation {
			t.Errorf("%s: answer %+v, error %v; want the commit's unique violation", name, got, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows committed (%v), want none", n, err)
	}
}

// A statement's answer is read by column name: a column the row type does
// not have fails the read, naming it, rather than filling another field.
func TestAnAnswerIsReadByName(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	type answer struct {
		Token  int64
		Holder string
	}
	got, err := queryOne[answer](ctx, pool, `SELECT 'h' AS holder, 7::bigint AS token`, nil)
	if err != nil || got != (answer{Token: 7, Holder: "h"}) {
		t.Errorf("columns in another order: %+v, %v; want token 7 of h", got, err)
	}
	_, err = queryOne[answer](ctx, pool, `SELECT 7::bigint AS token, 'h' AS holdr`, nil)
	if err == nil || !strings.Contains(err.Error(), "holdr") {
		t.Errorf("a misnamed column: %v; want an error naming it", err)
	}
}
