package lease

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Every statement's answer is read by column name into a row type declared
// beside it (pgx.RowToStructByName): a column renamed, added or dropped
// fails the read, naming the column, instead of landing in another field.

// querier is what a take, renewal or look sends its statement through: a
// DB as it is, or a replicaSession on one of its connections.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// reader reads a statement's one row (see into); the take's retries and
// fallbacks send the statement again with the same reader.
type reader func(pgx.Rows) error

// into is the reader of one row into *dest, by name. No row is
// pgx.ErrNoRows, as with QueryRow.
func into[T any](dest *T) reader {
	return func(rows pgx.Rows) (err error) {
		*dest, err = pgx.CollectOneRow(rows, pgx.RowToStructByName[T])
		return err
	}
}

// queryRow runs sql with args on db and reads its row with read.
func queryRow(ctx context.Context, db querier, sql string, args pgx.StrictNamedArgs, read reader) error {
	rows, err := db.Query(ctx, sql, args)
	if err != nil {
		return err
	}
	return read(rows)
}

// queryOne is queryRow into a new T.
func queryOne[T any](ctx context.Context, db querier, sql string, args pgx.StrictNamedArgs) (T, error) {
	var row T
	err := queryRow(ctx, db, sql, args, into(&row))
	return row, err
}

// queryValue runs sql, whose answer is one column, and reads its row's
// value: a single column needs no name.
func queryValue[T any](ctx context.Context, db querier, sql string, args pgx.StrictNamedArgs) (T, error) {
	var v T
	rows, err := db.Query(ctx, sql, args)
	if err == nil {
		v, err = pgx.CollectOneRow(rows, pgx.RowTo[T])
	}
	return v, err
}

// pipelineRows are the rows of a statement sent in a pipeline (a batch):
// they end when the pipeline does, at the end of its implicit transaction,
// so that a failed commit is their error and cannot pass for an answer.
type pipelineRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	end    error // the pipeline's, once closed
}

func (r *pipelineRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *pipelineRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.end = r.br.Close()
}

func (r *pipelineRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.end
}
