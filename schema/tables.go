// Package schema is the contract of leasewrap's tables. Each table is
// described once, in Leases and Runs: its columns with their types and what
// the statements need of their NULLs, the relation kinds it may be, and its
// key. Every check (the catalog check in Go, the shape checks a first take
// pipelines in front of itself) and every migration (CREATE, ADD COLUMN,
// SET NOT NULL) is derived from that description, so that a rule changed
// in one place changes everywhere.
//
// It only knows tables: taking and keeping leases is package lease's, and
// reading them for operators package inspect's, which uses Read alone and
// never creates or alters anything.
package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Nulls says what the statements need of a column's NULLs.
type Nulls int

const (
	// NullsAny: leasewrap writes a value on every take and never reads a
	// NULL back in a way that matters.
	NullsAny Nulls = iota
	// NotNull: the statements compare or scan the value, and a NULL would
	// break them: a NULL expires_at never compares <= now(), so the job
	// could never be taken again; a NULL holder or token cannot be scanned.
	// A table without the constraint is upgraded to it.
	NotNull
	// Nullable: a take or a release writes NULL to it; a NOT NULL there is
	// refused (dropping the operator's constraint is not ours to decide).
	Nullable
)

// Column is one column of a table.
type Column struct {
	Name string
	// Type is the type as format_type prints it, compared exactly: a
	// timestamp without time zone compared with now() depends on each
	// session's timezone, so two wrappers could both see a lease expired.
	Type string
	// Def is the definition used when creating or adding the column.
	Def   string
	Nulls Nulls
	// Core columns must be there for the table to be one of ours of any
	// age; a table lacking one is refused, never upgraded. The others are
	// added to an older table.
	Core bool
}

// Table describes one of leasewrap's tables.
type Table struct {
	// What names the table in messages.
	What    string
	Columns []Column
	// Kinds are the pg_class.relkind values accepted, and Kind says them
	// in words.
	Kinds []string
	Kind  string
	// Key is the column ON CONFLICT names: the table needs a primary key
	// on it alone, or no primary key and a unique index on it that is
	// neither partial nor deferrable. Empty for a table without one.
	Key string
	// Indexes are the column lists indexed when the table is created.
	Indexes []string
	// PrimaryKey, when set, is the table's primary key, in order, created
	// with it and required of an existing table (a key of several columns,
	// which Key cannot say).
	PrimaryKey []string
}

// Leases is the lease table: one row per job (or per slot of a job run
// with several). The minimal table has only its three core columns.
var Leases = Table{
	What: "lease table",
	Columns: []Column{
		{"job_name", "text", "text PRIMARY KEY", NotNull, true},
		{"holder", "text", "text NOT NULL", NotNull, true},
		{"expires_at", "timestamp with time zone", "timestamptz NOT NULL", NotNull, true},
		{"fencing_token", "bigint", "bigint NOT NULL DEFAULT 0", NotNull, false},
		{"acquired_at", "timestamp with time zone", "timestamptz", NullsAny, false},
		{"renewed_at", "timestamp with time zone", "timestamptz", NullsAny, false},
		{"last_started_at", "timestamp with time zone", "timestamptz", NullsAny, false},
		{"last_finished_at", "timestamp with time zone", "timestamptz", Nullable, false},
		{"last_exit_code", "integer", "integer", Nullable, false},
		{"last_holder", "text", "text", NullsAny, false},
		{"released_at", "timestamp with time zone", "timestamptz", Nullable, false},
		// slot and slots are set on the rows of a job with more than one
		// slot (NULL: a job with one): which slot the row is, and how many
		// the job has. Resetting slots to NULL is how an operator changes a
		// job's N.
		{"slot", "integer", "integer", Nullable, false},
		{"slots", "integer", "integer", Nullable, false},
		// schedule is the job's schedule in its canonical form, its time
		// zone included (schedule.Schedule.Spec), once an instance with
		// --schedule registered it (NULL: never scheduled); every
		// scheduled instance of the job must have the same. Resetting it
		// to NULL is how an operator changes a job's schedule.
		// last_scheduled_at is the scheduled time the current (or last)
		// scheduled take was for (NULL after a plain take; an earlier
		// version's plain take kept it, so a claim of that time with
		// another token says the run is not that time's).
		{"schedule", "text", "text", NullsAny, false},
		{"last_scheduled_at", "timestamp with time zone", "timestamptz", NullsAny, false},
		// accounted_through is the latest scheduled time of the job
		// accounted for (run, skipped or missed), with every time before
		// it. Each statement that claims scheduled times moves it on under
		// the row's lock, and a time not after it is never run or recorded
		// again: it holds when claims are pruned, deleted or truncated, and
		// when instances differ in window or catch-up policy.
		{"accounted_through", "timestamp with time zone", "timestamptz", NullsAny, false},
		// schedule_zone is a fingerprint of the zone data the schedule's
		// times were computed with by the instance that recorded it
		// (schedule.Schedule.ZoneRules; NULL: none recorded). An instance
		// whose zone data differ is refused, as one with another schedule.
		{"schedule_zone", "text", "text", NullsAny, false},
		// scheduled_since is when the job's schedule was recorded: by
		// the first instance that registered it, by a take that found
		// none, or by leasewrap reschedule to another one (NULL: before
		// this column, or never scheduled). A due time before it was owed
		// by nobody: the views do not judge it.
		{"scheduled_since", "timestamp with time zone", "timestamptz", NullsAny, false},
		// paused_until is set while an operator paused the job
		// (leasewrap pause; 'infinity': until resumed): no take takes the
		// row, and a scheduled time due meanwhile is claimed paused.
		// paused_at, paused_by and pause_reason say when, who and why.
		// Resuming sets all four to NULL.
		{"paused_until", "timestamp with time zone", "timestamptz", Nullable, false},
		{"paused_at", "timestamp with time zone", "timestamptz", Nullable, false},
		{"paused_by", "text", "text", Nullable, false},
		{"pause_reason", "text", "text", Nullable, false},
		// queue is the job's standbys in line for the lease, a JSON array
		// of entries (NULL: none ever queued): a release hands the lease
		// to the first live one in the same statement (see package lease,
		// queue_sql.go).
		{"queue", "jsonb", "jsonb", NullsAny, false},
		// released_by says who asked for the release of the live lease,
		// and how ("release by root@host", "release --to B by
		// root@host"; NULL: nobody, or a version that did not say): the
		// holder records it as its stopped run's stopped_by. Takes and
		// releases clear it.
		{"released_by", "text", "text", Nullable, false},
	},
	Kinds: []string{"r", "p"},
	Kind:  "a table",
	Key:   "job_name",
}

// Runs is the history table: one row per run, written when the run ends,
// and one per scheduled time that was missed or skipped.
// attempt numbers the runs of one lease (--retries). It is not a
// partitioned table: pruning deletes by row address (ctid), which is only
// unique within one table. Its indexes serve pruning and a fleet-wide view
// (finished_at) and one job's runs, newest first (job_name, finished_at).
var Runs = Table{
	What: "history table",
	Columns: []Column{
		{"job_name", "text", "text NOT NULL", NullsAny, true},
		{"slot", "integer", "integer NOT NULL DEFAULT 1", NullsAny, true},
		{"holder", "text", "text NOT NULL", NullsAny, true},
		{"fencing_token", "bigint", "bigint NOT NULL", NullsAny, true},
		{"attempt", "integer", "integer NOT NULL DEFAULT 1", NullsAny, true},
		{"started_at", "timestamp with time zone", "timestamptz NOT NULL", NullsAny, true},
		{"finished_at", "timestamp with time zone", "timestamptz NOT NULL", NullsAny, true},
		{"exit_code", "integer", "integer", NullsAny, true},
		{"outcome", "text", "text NOT NULL", NullsAny, true},
		// scheduled_at is the scheduled time a run was for (NULL: a run
		// without a schedule); output is the tail of what the command
		// printed, when the run kept it. Added to older history tables.
		{"scheduled_at", "timestamp with time zone", "timestamptz", Nullable, false},
		{"output", "bytea", "bytea", Nullable, false},
		// stopped_by says who asked for a run's stop, for a run whose
		// outcome is stopped ("SIGTERM to leasewrap", "release by
		// root@host"; NULL: another outcome, or not known). Added to
		// older history tables.
		{"stopped_by", "text", "text", Nullable, false},
	},
	Kinds:   []string{"r"},
	Kind:    "a plain table",
	Indexes: []string{"finished_at", "job_name, finished_at"},
}

// Claims is the claims table: one row per scheduled time of a job, the
// time's only account, keyed by (job, scheduled time). The take of a
// scheduled run inserts its row in the same statement as the lease take;
// a time nobody ran gets one with outcome missed (or skipped), so a time
// can be run, missed or skipped once and only once. first_at is set on a
// row that stands for every missed time from first_at to scheduled_at (a
// long outage summarised); claimed_at is when the row was written, on the
// database clock. Rows older than the history keep (and than the
// catch-up window) are deleted.
var Claims = Table{
	What: "claims table",
	Columns: []Column{
		{"job_name", "text", "text NOT NULL", NullsAny, true},
		{"scheduled_at", "timestamp with time zone", "timestamptz NOT NULL", NullsAny, true},
		{"outcome", "text", "text NOT NULL", NullsAny, true},
		{"holder", "text", "text NOT NULL", NullsAny, true},
		{"fencing_token", "bigint", "bigint NOT NULL", NullsAny, true},
		{"first_at", "timestamp with time zone", "timestamptz", Nullable, true},
		{"claimed_at", "timestamp with time zone", "timestamptz NOT NULL DEFAULT now()", NullsAny, true},
	},
	Kinds:      []string{"r"},
	Kind:       "a plain table",
	PrimaryKey: []string{"job_name", "scheduled_at"},
}

// column returns the column named name, or nil.
func (t Table) column(name string) *Column {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i]
		}
	}
	return nil
}

// CheckFunction is the name of the SQL function that fences a child's
// transaction: leasewrap_check(job text, token bigint, lease_table text
// DEFAULT 'leader_lease'). It is created in the lease table's schema.
const CheckFunction = "leasewrap_check"

// checkArgs are the function's argument types, as to_regprocedure wants.
const checkArgs = "(text,bigint,text)"

// ErrCodeFenced is the SQLSTATE leasewrap_check raises when the token is not
// the job's current one or the lease has expired.
const ErrCodeFenced = "LW001"

// checkFunctionBody locks the lease row FOR KEY SHARE until the caller's
// transaction ends. That does not block the holder's renewals, but a
// takeover (which also sets the key column) waits for it, so no new leader
// starts in the middle of a fenced transaction. The table name is resolved
// through regclass at run time, which quotes it.
const checkFunctionBody = `(job text, token bigint, lease_table text DEFAULT 'leader_lease')
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  current_token bigint;
  live boolean;
BEGIN
  EXECUTE format('SELECT fencing_token, expires_at > clock_timestamp() FROM %s WHERE job_name = $1 FOR KEY SHARE',
                 lease_table::regclass)
    INTO current_token, live USING job;
  IF current_token IS NULL THEN
    RAISE EXCEPTION 'leasewrap: no lease for job %', job USING ERRCODE = '` + ErrCodeFenced + `';
  ELSIF current_token <> token THEN
    RAISE EXCEPTION 'leasewrap: fencing token % of job % is stale, the current one is %', token, job, current_token
      USING ERRCODE = '` + ErrCodeFenced + `';
  ELSIF NOT live THEN
    RAISE EXCEPTION 'leasewrap: the lease on job % has expired', job USING ERRCODE = '` + ErrCodeFenced + `';
  END IF;
END
$fn$`

// HistorySuffix ends the history table's name: the runs of leases in
// table "t" are kept in "t_history", in the same schema.
const HistorySuffix = "_history"

// ClaimsSuffix ends the claims table's name: the scheduled times of jobs
// in table "t" are claimed in "t_schedule", in the same schema.
const ClaimsSuffix = "_schedule"

// Objects names what one lease table's contract covers, each quoted once:
// the lease table, its history table and the fencing function.
type Objects struct {
	table pgx.Identifier
	// requests is the claims table's index of requested runs.
	requests pgx.Identifier
	// Lease, History, Claims and Function are the quoted names, as SQL
	// takes them.
	Lease, History, Claims, Function string
	// functions are the lease table's own (see WithFunctions).
	functions []Function
}

// RequestsIndex is the claims table's index of requested runs, quoted.
func (o Objects) RequestsIndex() string { return o.requests.Sanitize() }

// For names the objects of the lease table table.
func For(table pgx.Identifier) Objects {
	fn := append(append(pgx.Identifier{}, table[:len(table)-1]...), CheckFunction)
	return Objects{table: table, Lease: table.Sanitize(), History: HistoryTable(table).Sanitize(),
		Claims: ClaimsTable(table).Sanitize(), Function: fn.Sanitize(),
		requests: suffixed(ClaimsTable(table), requestsSuffix)}
}

// HistoryTable names the history table of a lease table: "<table>_history",
// in the same schema. A name that would pass PostgreSQL's 63 bytes is
// shortened and given a hash of the whole.
func HistoryTable(table pgx.Identifier) pgx.Identifier { return suffixed(table, HistorySuffix) }

// ClaimsTable names the claims table of a lease table: "<table>_schedule",
// in the same schema, shortened as HistoryTable's name is.
func ClaimsTable(table pgx.Identifier) pgx.Identifier { return suffixed(table, ClaimsSuffix) }

// suffixed names a table that goes with table: its name and suffix, in
// the same schema, shortened with a hash of the whole to fit 63 bytes.
func suffixed(table pgx.Identifier, suffix string) pgx.Identifier {
	out := append(pgx.Identifier{}, table...)
	name := out[len(out)-1]
	if len(name)+len(suffix) <= 63 {
		out[len(out)-1] = name + suffix
		return out
	}
	sum := sha256.Sum256([]byte(name))
	tag := "_" + hex.EncodeToString(sum[:4]) + suffix
	cut := 63 - len(tag)
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	out[len(out)-1] = name[:cut] + tag
	return out
}
