// Package inspect answers an operator's questions about leases and runs:
// who holds what (Status), what ran (History), how fresh a job is
// (Freshness) and what a monitoring system scrapes (Summaries). A Reader
// only reads: its DB has no method that could run anything but a query,
// its statements are SELECTs, and it never creates, alters or migrates a
// table, so a role with nothing but SELECT on the two tables (and USAGE on
// their schema) may use it, and a history table that is missing or broken
// never keeps Status from answering.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// DB is the part of *pgxpool.Pool and *pgx.Conn a Reader uses: queries,
// and nothing that writes or opens a transaction.
type DB interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ErrNoTable is matched (errors.Is) by the error of a read that found no
// lease table: a mistyped table name, or no job has run yet. Reads never
// create it.
var ErrNoTable = errors.New("no lease table")

// ErrNoHistory means there is no history table (yet).
var ErrNoHistory = errors.New("no run history")

// Reader reads the leases of one lease table and the runs of its history.
type Reader struct {
	db      DB
	objects schema.Objects
	sql     statements
}

// statements are a Reader's statements, rendered for its tables. For a
// history table of an older version, which lacks columns added since
// (kept output, schedules, who stopped a run), they are rendered again
// (forTable): a reader never upgrades the table, and reads NULL in their
// place (output is then empty).
type statements struct {
	status, history, freshness, summary, output string
	// origins reads the claims of runs, facts what a verdict needs
	// beyond the summary, account a scheduled time's claim and run.
	origins, facts, account string
	// tables reads which of the two tables are there.
	tables string
}

// addedColumns are the columns added since the tables' first versions
// that a view reads where an earlier version's table may lack them (the
// history's, and the lease table's scheduled_since): the placeholder a
// statement reads each through, and what it reads from a table with the
// column and from one without.
var addedColumns = []struct{ column, placeholder, present, absent string }{
	{"scheduled_at", "{scheduled_at}", "h.scheduled_at", "NULL::timestamptz"},
	{"output", "{output_bytes}", "octet_length(h.output)", "NULL::integer"},
	{"stopped_by", "{stopped_by}", "h.stopped_by", "NULL::text"},
	{"scheduled_since", "{scheduled_since}", "scheduled_since", "NULL::timestamptz"},
}

// render renders the statements for o's tables, reading the history's
// missing columns as NULL.
func render(o schema.Objects, missing []string) statements {
	var pairs []string
	for _, c := range addedColumns {
		read := c.present
		if slices.Contains(missing, c.column) {
			read = c.absent
		}
		pairs = append(pairs, c.placeholder, read)
	}
	cols := strings.NewReplacer(pairs...)
	output := cols.Replace(o.Render(outputSQL))
	if slices.Contains(missing, "output") {
		output = ""
	}
	return statements{
		status:    o.Render(statusSQL),
		history:   cols.Replace(o.Render(historySQL)),
		origins:   o.Render(originsSQL),
		freshness: cols.Replace(o.Render(freshnessSQL)),
		summary:   cols.Replace(o.Render(summarySQL)),
		facts:     o.Render(factsSQL),
		account:   o.Render(accountSQL),
		tables:    tablesSQL,
		output:    output,
	}
}

// forTable returns the statements for the history table hs describes.
func (r *Reader) forTable(hs schema.HistoryState) *statements {
	if len(hs.MissingColumns) == 0 {
		return &r.sql
	}
	sql := render(r.objects, hs.MissingColumns)
	return &sql
}

// Open returns a Reader of the lease table table, named as lease.WithTable
// takes it ("" for lease.DefaultTable). It does not touch the database.
func Open(db DB, table string) (*Reader, error) {
	if table == "" {
		table = lease.DefaultTable
	}
	id, err := lease.ParseTable(table)
	if err != nil {
		return nil, err
	}
	o := schema.For(id)
	return &Reader{db: db, objects: o, sql: render(o, nil)}, nil
}

// noTable is the error of a read that found no lease table.
func (r *Reader) noTable() error {
	return fmt.Errorf("%w %s: check the table's name (leasewrap migrate or a job's first run creates it)", ErrNoTable, r.objects.Lease)
}

// readableHistory checks, without creating anything, that the lease table
// is there (a mistyped table is not an empty history) and that the history
// table is there and of our shape.
func (r *Reader) readableHistory(ctx context.Context) (schema.HistoryState, error) {
	st, err := r.objects.Read(ctx, r.db)
	switch {
	case err != nil:
		return st.History, err
	case !st.TableExists:
		return st.History, r.noTable()
	case st.History.Problem != nil:
		return st.History, fmt.Errorf("run history unavailable: %w", st.History.Problem)
	case !st.History.Exists:
		return st.History, fmt.Errorf("no history table %s (run leasewrap migrate, or a job with this version): %w", r.objects.History, ErrNoHistory)
	}
	return st.History, nil
}

// historyError is a failed read of the history table.
func (r *Reader) historyError(err error) error {
	return fmt.Errorf("%w: cannot read history table %s: %w", schema.ErrHistoryUnavailable, r.objects.History, pgerr.Classify(err))
}
