package schema

import "strings"

// Render returns a statement's text with its tables in place: a statement
// names the lease table {lease}, the history table {history} and the
// claims table {claims}, and
// Render puts in the names For quoted. Every statement of the lease
// packages is written that way, as one constant, and rendered once per
// Store or Reader.
func (o Objects) Render(text string) string {
	return strings.NewReplacer("{lease}", o.Lease, "{history}", o.History, "{claims}", o.Claims).Replace(text)
}

// SQL expressions over a row of the lease table, shared by the take (which
// reads the holder it found) and the readers. A lease is live while
// expires_at > now(); all times come from the database clock.
const (
	// ExpiresInMicros is how long until expiry, in microseconds (negative
	// once expired).
	ExpiresInMicros = `(extract(epoch FROM expires_at - now()) * 1000000)::bigint`

	// HeldState says how a live lease is held: 'held', 'kept' (the command
	// finished, hold-for keeps it) or 'releasing' (an operator asked the
	// holder to stop). A release without hold-for (or after it ran out,
	// or forced) sets expires_at to its own now(), so expires_at <=
	// released_at: that lease is 'released' even where it still looks
	// live, to a statement whose now() is older than the release (the
	// first take of a wrapper runs after its shape checks, in their
	// transaction, and a release that commits in between looks live to it
	// for those milliseconds), or when the row is read after its expiry.
	// A standby's look works it out in Go from the bare row (the lease
	// StateOf; TestLookAgreesWithTheSQLState keeps them alike).
	HeldState = `CASE WHEN released_at IS NULL THEN '` + string(StateHeld) + `'
  WHEN expires_at <= released_at THEN '` + string(StateReleased) + `'
  WHEN last_finished_at IS NOT NULL THEN '` + string(StateKept) + `' ELSE '` + string(StateReleasing) + `' END`

	// RowState is the state of any lease row: HeldState while it is live,
	// else 'released' (handed back) or 'expired' (never released).
	RowState = `CASE WHEN expires_at > now() THEN ` + HeldState + ` WHEN released_at IS NOT NULL THEN '` + string(StateReleased) + `'
  ELSE '` + string(StateExpired) + `' END`

	// BaseJob is a lease row's job: its name, less the "#N" of a slot row.
	BaseJob = `CASE WHEN slot > 1 THEN left(job_name, length(job_name) - length('#' || slot)) ELSE job_name END`
)
