package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schema"
)

// Outcomes of a run, as the history records them. The list may grow;
// readers should show an outcome they do not know as it is.
const (
	// OutcomeExited: the command exited on its own; ExitCode says how.
	OutcomeExited = "exited"
	// OutcomeSignalled: the command was ended by a signal (exit code 128+N).
	OutcomeSignalled = "signalled"
	// OutcomeLost: the lease was lost while the command ran and it was
	// stopped, or its holder never came back to release it (a crash, a
	// cut): then the next holder closed the run, at its lease's expiry.
	OutcomeLost = "lost"
	// OutcomeStopped: leasewrap was asked to stop the run, and stopped
	// the command: a signal to leasewrap (a rolling restart, docker stop,
	// systemctl stop), or an operator's release of the lease (leasewrap
	// release --id or --to). Not a failure of the command, and not a
	// success either; the history says who asked (stopped_by). A command
	// that dies of a signal nobody sent through leasewrap is
	// OutcomeSignalled.
	OutcomeStopped = "stopped"
	// OutcomeCouldNotStart: the lease was taken, but the command could not
	// be executed or the lease was in doubt before it started; or it was
	// handed to a standby that never adopted it (see queue.go).
	OutcomeCouldNotStart = "could_not_start"
	// OutcomeTimedOut: the command ran past --max-runtime and was stopped.
	OutcomeTimedOut = "timed_out"
	// OutcomeMissed: a scheduled time no instance ran (all were down, the
	// database was unreachable, or catch-up left it out). The row's
	// started_at and finished_at are the scheduled time.
	OutcomeMissed = "missed"
	// OutcomeSkipped: a scheduled time not run because the previous run
	// still held the lease (runs of one job never overlap).
	OutcomeSkipped = "skipped"
)

// Outcomes lists the outcomes the history records today, in a stable
// order, for readers that want a series for each even before it happens.
var Outcomes = []string{OutcomeExited, OutcomeSignalled, OutcomeLost, OutcomeStopped, OutcomeCouldNotStart, OutcomeTimedOut,
	OutcomeMissed, OutcomeSkipped, OutcomePaused}

// DefaultHistoryKeep is how long runs stay in the history.
const DefaultHistoryKeep = 30 * 24 * time.Hour

// historyStatements are the statements that also write the history.
type historyStatements struct {
	take, takeSlots, release string
	// prune: release also deletes old runs (releasePruningSQL).
	prune bool
}

// useHistory returns the take and release statements that record runs,
// when the history table is there and this role may write to it;
// otherwise it says once why runs are not recorded, counts it, and
// returns nil.
func (s *Store) useHistory(hs schema.HistoryState) *historyStatements {
	name := s.objects.History
	switch {
	case hs.Problem != nil:
		s.historyFailed(fmt.Errorf("%w (fix or drop it, then migrate the tables)", hs.Problem))
		return nil
	case !hs.Complete:
		return nil // ensureSchema warned
	case !hs.CanWrite:
		s.historyFailed(fmt.Errorf("this role may not INSERT into and SELECT from %s (GRANT SELECT, INSERT, DELETE ON %s)", name, name))
		return nil
	}
	prune := s.cfg.historyKeep > 0
	if prune && !hs.CanPrune {
		s.log.Warn().Str("table", s.cfg.table).Msgf(
			"old runs are not pruned: this role may not DELETE from %s (GRANT DELETE ON %s)", name, name)
		prune = false
	}
	return s.recording(prune)
}

// recording returns the statements that also write the history,
// with pruning or without.
func (s *Store) recording(prune bool) *historyStatements {
	h := &historyStatements{take: s.sql.takeRecording, takeSlots: s.sql.takeSlotsRecording, release: s.sql.releaseRecording, prune: prune}
	if prune {
		h.release = s.sql.releasePruning
	}
	return h
}

// HistoryObserver is an Observer that is also told when runs cannot be
// recorded in the history (the table is broken, missing, or this role may
// not write to it), each time leasewrap gives up recording them.
type HistoryObserver interface {
	HistoryFailed(err error)
}

// historyFailed says, once per failure, that runs are no longer recorded
// and why, and tells the observer. The lease is not affected.
func (s *Store) historyFailed(err error) {
	s.log.Warn().Str("table", s.cfg.table).Str("history_table", s.objects.History).
		Msgf("runs are not recorded, the job runs on under its lease: %v", err)
	if o, ok := s.cfg.observer.(HistoryObserver); ok {
		o.HistoryFailed(err)
	}
}

// withoutHistory is called with err, the failure of a statement that also
// wrote the history. When err may be the history's (a statement the server
// refused, not a dropped connection or a timeout), it runs plain, the same
// statement without the history: if that one succeeds, the history was at
// fault, and runs are no longer recorded (said once, and counted). It
// returns plain's error, or err when plain was not tried.
func (s *Store) withoutHistory(ctx context.Context, err error, plain func() error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || ctx.Err() != nil || retryable(err) {
		return err
	}
	perr := plain()
	if perr != nil && !errors.Is(perr, pgx.ErrNoRows) {
		return perr
	}
	if pgerr.SQLState(err) == pgerr.CodeUndefinedTable && s.remakeHistory(ctx) {
		return perr
	}
	// Swap: two statements that failed at once say it once.
	if s.dropHistory() {
		s.historyFailed(fmt.Errorf("writing to %s failed: %w", s.objects.History, pgerr.Classify(err)))
	}
	return perr
}

// remakeHistory makes the history table again when an operator dropped it
// under this instance (the statement without it succeeded), as a
// scheduler's take makes the lease and claims tables again, and reports
// whether runs are recorded again: from the next statement on, that one's
// run being recorded without it.
func (s *Store) remakeHistory(ctx context.Context) bool {
	s.log.Warn().Str("table", s.cfg.table).Str("history_table", s.objects.History).Msg("the history table is gone; making it again")
	return s.checkSchema(ctx, true) == nil && s.hist() != nil
}

// releaseWithoutHistory is the release that failed with err while it also
// recorded the run, run again without recording it when the history was at
// fault (see withoutHistory): the lease is handed back either way. args
// are the release's, which the plain release takes too.
func (s *Store) releaseWithoutHistory(ctx context.Context, err error, args pgx.NamedArgs) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err = s.withoutHistory(ctx, err, func() error {
		var perr error
		tag, perr = s.db.Exec(ctx, s.sql.release, args)
		return perr
	})
	return tag, err
}
