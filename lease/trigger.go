package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schema"
)

// ClaimRequested is the outcome of a claim that asks the job's schedulers
// to run it once now (RequestRun); the scheduler that runs it turns it into
// ClaimManual in the same statement as its take.
const ClaimRequested = schema.RequestedOutcome

// ErrNotScheduled means a run was requested of a job that has no schedule
// recorded: no scheduler would run it. Every *NotScheduledError matches it
// (errors.Is).
var ErrNotScheduled = errors.New("no schedule recorded")

// NotScheduledError is RequestRun's refusal of a job no scheduler would
// run: it has no lease row in Table (NoRow), or no schedule recorded in
// it. It states the facts; how to start a scheduler is the caller's to
// say, in its own words.
type NotScheduledError struct {
	Job   string
	Table string // quoted, as in SQL
	NoRow bool
}

func (e *NotScheduledError) Error() string {
	if e.NoRow {
		return fmt.Sprintf("job %q has no lease row in %s: %v", e.Job, e.Table, ErrNotScheduled)
	}
	return fmt.Sprintf("job %q has %v: no scheduler would run it", e.Job, ErrNotScheduled)
}

// Unwrap makes errors.Is(err, ErrNotScheduled) true.
func (e *NotScheduledError) Unwrap() error { return ErrNotScheduled }

// ErrNoLeaseTable means the lease table (or its claims table) does not
// exist; RequestRun creates nothing.
var ErrNoLeaseTable = errors.New("no such table")

// Why a request is a row of the claims table, and not a notification only:
//
//   - It outlives the schedulers: a request made while none listens (all
//     restarting, or polling through PgBouncer) waits in the table, and a
//     request that finds the lease held (the previous run still going)
//     waits until the lease is free. It is never skipped or dropped.
//   - It is run exactly once, as a scheduled time is: the take that runs it
//     locks the request row first (FOR UPDATE), and turns it into a manual
//     claim in the same statement as the lease take, conditional on the
//     token it read. A second scheduler either waits for that lock and then
//     finds the row no longer requested, or finds the lease taken.
//   - The notification (pg_notify in the same statement as the insert, so
//     it goes out with the commit) only wakes the listening schedulers
//     early; the row is the request.
//
// The request's time is the database's now() when it was made; the run's
// history row carries it as its scheduled_at.

// requestSQL records a request to run a job now: @job, @holder who asks, @channel
// the notification channel, @payload its payload. It records nothing for a job without a
// schedule. It answers whether the job has a lease row, its schedule and
// the request's time (NULL: none recorded).
//
// It has no RETURNING, which would need SELECT on the claims table: the
// request's time is now(), the same all through the transaction, and it
// was recorded exactly when the job has a schedule.
const requestSQL = `WITH job AS (
  SELECT schedule FROM {lease} WHERE job_name = @job::text),
req AS (
  INSERT INTO {claims} (job_name, scheduled_at, outcome, holder, fencing_token, claimed_at)
  SELECT @job::text, now(), '` + ClaimRequested + `', @holder::text, 0, now() FROM job WHERE schedule IS NOT NULL)
SELECT EXISTS (SELECT FROM job) AS has_row, s.schedule, CASE WHEN s.schedule IS NOT NULL THEN now() END AS at,
  CASE WHEN s.schedule IS NOT NULL THEN pg_notify(@channel::text, @payload::text)::text END AS notified
FROM (SELECT (SELECT schedule FROM job) AS schedule) AS s`

// scheduleOfSQL reads the schedule recorded with a job: @job.
const scheduleOfSQL = `SELECT schedule FROM {lease} WHERE job_name = @job::text`

// takeRequestedSQL takes the lease of a scheduled job for its oldest
// request and turns the request into a manual claim (see above): @job,
// @holder, @ttl (microseconds), @spec the canonical spec. The take has the scheduled
// take's conditions (free or expired row, the token and finished run it
// read, the same schedule, one slot). It answers: taken, token, the
// oldest request's time (NULL: none), the row's holder, microseconds
// left and state, and the database clock.
var takeRequestedSQL = takeRequestedCTEs + takeRequestedAnswer

// takeRequestedRecordingSQL is takeRequestedSQL that also closes the run
// of a holder that never released as lost (with its scheduled time, when
// its claim proves it), as the scheduled take does.
var takeRequestedRecordingSQL = takeRequestedCTEs + lostScheduledRun + takeRequestedAnswer

var takeRequestedCTEs = `WITH old AS (
  SELECT fencing_token, holder, expires_at, acquired_at, renewed_at, last_started_at, last_finished_at, last_scheduled_at, schedule, slots, paused_until
  FROM {lease} WHERE job_name = @job::text),
req AS (
  SELECT scheduled_at FROM {claims} WHERE job_name = @job::text AND outcome = '` + ClaimRequested + `'
  ORDER BY scheduled_at LIMIT 1 FOR UPDATE),
free AS (
  SELECT r.scheduled_at FROM req r, old o
  WHERE o.expires_at <= now() AND coalesce(o.schedule, @spec::text) = @spec::text AND coalesce(o.slots, 1) = 1
    AND NOT coalesce(o.` + pausedCondition + `, false)),
` + takeSpec{row: "@job::text", from: "free", read: "old",
	columns: []takeColumn{{name: "schedule", value: "@spec::text"}, {name: "last_scheduled_at", value: "scheduled_at"},
		{name: "scheduled_since", value: "now()", update: scheduledSince}},
	where: "coalesce(l.slots, 1) = 1 AND coalesce(l.schedule, @spec::text) = @spec::text"}.taken() + `,
claim AS (
  UPDATE {claims} c SET outcome = '` + ClaimManual + `', holder = @holder::text, fencing_token = t.fencing_token, claimed_at = now()
  FROM taken t, free f
  WHERE c.job_name = @job::text AND c.scheduled_at = f.scheduled_at AND c.outcome = '` + ClaimRequested + `'
  RETURNING 1)`

const takeRequestedAnswer = `
SELECT EXISTS (SELECT FROM taken) AND EXISTS (SELECT FROM claim) AS taken, coalesce((SELECT fencing_token FROM taken), 0) AS token,
  (SELECT scheduled_at FROM req) AS at, l.holder, ` + schema.ExpiresInMicros + ` AS expires_in_micros, ` + schema.HeldState + ` AS state, now() AS now
FROM (VALUES (1)) AS one LEFT JOIN {lease} AS l ON l.job_name = @job::text`

// requestStatements are the statements of manual runs, rendered for a
// Store's tables.
type requestStatements struct{ request, take, takeRecording string }

func newRequestStatements(o schema.Objects) requestStatements {
	return requestStatements{
		request:       o.Render(requestSQL),
		take:          o.Render(takeRequestedSQL),
		takeRecording: o.Render(takeRequestedRecordingSQL),
	}
}

// requestChannel is the NOTIFY channel and payload that wake the
// schedulers of job: the channel a release of job's lease notifies on (so
// that a scheduler with a request waiting for the lease also hears the
// release, whose payload is the job: the job's own channel, so that the
// releases of other jobs wake no scheduler), with a payload of its own,
// which no standby takes for a release.
func (s *Store) requestChannel(job string) (channel, payload string) {
	return jobChannel(s.channel, job), "run-now:" + job
}

// RequestRun records a request that job's schedulers run it once now, and
// wakes the ones that listen. It returns the request's time on the
// database clock. It refuses with a *NotScheduledError (matching
// ErrNotScheduled) a job without a schedule recorded, and with
// ErrNoLeaseTable when the tables do not
// exist: it creates nothing, and needs only SELECT on the lease table and
// INSERT on its claims table.
func (s *Store) RequestRun(ctx context.Context, job string) (time.Time, error) {
	if err := CheckJob(job); err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	channel, payload := s.requestChannel(job)
	req, err := queryOne[requestRow](ctx, s.db, s.sql.req.request, pgx.StrictNamedArgs{"job": job, "holder": s.cfg.holder, "channel": channel, "payload": payload})
	if pgerr.SQLState(err) == pgerr.CodeUndefinedTable {
		// No claims table (no job of this table ever ran on a schedule),
		// or no tables at all: which one decides the answer.
		req.Schedule, err = queryValue[*string](ctx, s.db, s.sql.scheduleOf, pgx.StrictNamedArgs{"job": job})
		switch {
		case errors.Is(err, pgx.ErrNoRows) || err == nil && req.Schedule == nil:
			req.HasRow, err = err == nil, nil
		case err == nil || pgerr.SQLState(err) == pgerr.CodeUndefinedTable:
			return time.Time{}, fmt.Errorf("cannot request a run of %q: %w: %s (or its claims table) does not exist; no scheduler has run on it",
				job, ErrNoLeaseTable, s.table.Sanitize())
		}
	}
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("cannot request a run of %q: %w", job, pgerr.Classify(err))
	case !req.HasRow:
		return time.Time{}, &NotScheduledError{Job: job, Table: s.table.Sanitize(), NoRow: true}
	case req.Schedule == nil || req.At == nil:
		return time.Time{}, &NotScheduledError{Job: job, Table: s.table.Sanitize()}
	}
	return *req.At, nil
}

// requestRow reads requestSQL. Notified is the notification's (empty)
// value: sending it is why the column is there.
type requestRow struct {
	HasRow   bool
	Schedule *string
	At       *time.Time
	Notified *string
}

// requestFateSQL reads what became of a request, from the lease table
// alone (SELECT on it is all a trigger's role has to read with): @job,
// @at the request's time. A take for a request writes the request's time
// to the row's last_scheduled_at, which no other take writes (a scheduled
// take writes its own time, a plain take NULL). It answers whether the
// row records a take for the request, its holder, microseconds left and
// state, and whether the job is paused (no take takes a paused job's
// lease) and by whom.
const requestFateSQL = `SELECT last_scheduled_at IS NOT DISTINCT FROM @at::timestamptz AS taken, holder, ` +
	schema.ExpiresInMicros + ` AS expires_in_micros, ` + schema.HeldState + ` AS state, coalesce(` + pausedCondition + `, false) AS paused,
  coalesce(paused_by, '') AS paused_by
FROM {lease} WHERE job_name = @job::text`

// withdrawSQL deletes a request that no scheduler took: @job, @at the
// request's time, @holder who asked. Only while it is still a request: a take
// that locked the row first turns it into a manual claim, and this
// deletes nothing; once this deleted it, a take finds nothing to take.
// PostgreSQL reads the row to test the condition, so this needs SELECT on
// the claims table as well as DELETE.
const withdrawSQL = `DELETE FROM {claims}
WHERE job_name = @job::text AND scheduled_at = @at::timestamptz AND outcome = '` + ClaimRequested + `' AND holder = @holder::text`

// requestPoll is how often AwaitRequest reads the lease row.
const requestPoll = 200 * time.Millisecond

// Awaited is the answer to AwaitRequest: what became of a request.
type Awaited struct {
	// Taken is set when a scheduler took the lease for the request and
	// claimed it as a manual run; By is its holder ("" once the lease
	// row has moved on).
	Taken bool
	By    string
	// Held is set when no scheduler took the request because the lease
	// is held: the request waits for that run to end.
	Held *HeldError
	// Withdrawn is set when no scheduler took the request while the
	// lease was free: none serves the job (none runs, or none reaches the
	// database; --once instances never serve requests). The request was
	// deleted, so that nothing runs it later by surprise.
	Withdrawn bool
	// Paused is set when the job is paused (by PausedBy): no scheduler
	// takes a request then, and AwaitRequest withdraws it at once rather
	// than let it run when the job is resumed.
	Paused   bool
	PausedBy string
}

// ErrNotWithdrawn means a request that no scheduler took could not be
// withdrawn: it stays, and the next scheduler of the job to start runs
// it.
var ErrNotWithdrawn = errors.New("the request could not be withdrawn")

// AwaitRequest waits up to within for a scheduler to take the request of
// job made at at (RequestRun's time), reading the lease row every 200ms.
// Taken, it answers at once. When within has passed, it answers Held if
// the lease is held (the request waits for the run that holds it), and
// otherwise withdraws the request, only if it is still one (Withdrawn; or
// Taken when a take beat the withdrawal). A paused job's request is
// withdrawn at once (Withdrawn and Paused). Reading needs SELECT on the
// lease table; withdrawing needs SELECT and DELETE on its claims table,
// and a withdrawal that fails is ErrNotWithdrawn.
func (s *Store) AwaitRequest(ctx context.Context, job string, at time.Time, within time.Duration) (Awaited, error) {
	deadline := time.Now().Add(within)
	var paused Awaited
	for {
		a, err := s.requestFate(ctx, job, at)
		if err != nil || a.Taken {
			return a, err
		}
		if a.Paused {
			paused = a
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			if a.Held != nil {
				return a, nil
			}
			break
		}
		t := time.NewTimer(min(left, requestPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return Awaited{}, fmt.Errorf("cannot learn whether a scheduler took the request of %q: %w", job, ctx.Err())
		case <-t.C:
		}
	}
	wctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	tag, err := s.db.Exec(wctx, s.sql.withdraw, pgx.StrictNamedArgs{"job": job, "at": at, "holder": s.cfg.holder})
	switch {
	case pgerr.SQLState(err) == pgerr.CodeNoPrivilege:
		return Awaited{}, fmt.Errorf("%w: the role lacks SELECT or DELETE on %s (GRANT SELECT, INSERT, DELETE ON it): %w",
			ErrNotWithdrawn, schema.ClaimsTable(s.table).Sanitize(), err)
	case err != nil:
		return Awaited{}, fmt.Errorf("%w: %w", ErrNotWithdrawn, pgerr.Classify(err))
	case tag.RowsAffected() > 0:
		return Awaited{Withdrawn: true, Paused: paused.Paused, PausedBy: paused.PausedBy}, nil
	}
	// A take locked the request before the withdrawal did.
	a, err := s.requestFate(ctx, job, at)
	if err != nil {
		return Awaited{Taken: true}, nil
	}
	a.Taken, a.Held = true, nil
	return a, nil
}

// requestFate reads what became of the request of job made at at.
func (s *Store) requestFate(ctx context.Context, job string, at time.Time) (Awaited, error) {
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	fate, err := queryOne[fateRow](ctx, s.db, s.sql.requestFate, pgx.StrictNamedArgs{"job": job, "at": at})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Awaited{}, nil
	case err != nil:
		return Awaited{}, fmt.Errorf("cannot learn whether a scheduler took the request of %q: %w", job, pgerr.Classify(err))
	case fate.Taken:
		return Awaited{Taken: true, By: fate.Holder}, nil
	case fate.Paused:
		return Awaited{Paused: true, PausedBy: fate.PausedBy}, nil
	case fate.ExpiresInMicros > 0:
		return Awaited{Held: &HeldError{Job: job, Holder: fate.Holder, State: State(fate.State),
			ExpiresIn: time.Duration(fate.ExpiresInMicros) * time.Microsecond}}, nil
	}
	return Awaited{}, nil
}

// fateRow reads requestFateSQL.
type fateRow struct {
	Taken           bool
	Holder          string
	ExpiresInMicros int64
	State           string
	Paused          bool
	PausedBy        string
}

// Requested is the answer to TakeRequested.
type Requested struct {
	// Lease is set when this instance took the lease for the oldest
	// request and claimed it as a manual run: run the command, then
	// Finish the lease. Its ScheduledAt is the request's time.
	Lease *Lease
	// At is the oldest request's time (zero: none waits).
	At time.Time
	// Held is the lease's holder when a request waits for it.
	Held *HeldError
	// Now is the database clock when it answered.
	Now time.Time
}

// TakeRequested takes the lease on job for its oldest requested run, and
// claims the request as a manual run in the same statement (see
// takeRequestedSQL): spec is the job's canonical schedule. A request finds
// the lease held waits: it is not taken, and Held says until when.
// Register must have succeeded first.
func (s *Store) TakeRequested(ctx context.Context, job, spec string) (Requested, error) {
	tk, end, err := s.startSchedulerTake(ctx, job)
	defer end()
	if err != nil {
		return Requested{}, err
	}
	var row requestedRow
	args := s.takeArgs(job)
	args["spec"] = spec
	err = s.sendSchedulerTake(tk, s.sql.req.take, s.sql.req.takeRecording, args, into(&row), func(error) bool { return false })
	if err != nil {
		err = fmt.Errorf("cannot take lease %q for a requested run: %w", job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return Requested{}, err
	}
	s.cfg.observer.Contacted()
	r := Requested{Now: row.Now}
	if row.At != nil {
		r.At = *row.At
	}
	switch {
	case row.Taken:
		r.Lease, err = s.scheduledLease(tk.ctx, tk.db, job, row.Token, r.At, tk.t0, tk.budget)
		if r.Lease == nil {
			return Requested{}, err
		}
		return r, err
	case row.At != nil && row.Holder != nil && row.ExpiresInMicros != nil && *row.ExpiresInMicros > 0:
		r.Held = &HeldError{Job: job, Holder: *row.Holder, Token: row.Token, State: State(*row.State),
			ExpiresIn: time.Duration(*row.ExpiresInMicros) * time.Microsecond}
	}
	return r, nil
}

// requestedRow reads takeRequestedAnswer.
type requestedRow struct {
	Taken           bool
	Token           int64
	At              *time.Time
	Holder, State   *string
	ExpiresInMicros *int64
	Now             time.Time
}

// RequestWatch tells a scheduler when to look for requested runs of its
// job: at once when it starts, when a request (or a release of the job's
// lease) is announced while it listens, and on every look while it cannot
// listen (the caller then polls every retry interval). A connection that
// turns out not to hear at all (see probe) ends the listening for good.
type RequestWatch struct {
	wake      chan struct{}
	look      atomic.Bool
	listening atomic.Bool
	cancel    context.CancelFunc
	done      chan struct{}
	l         *listener // the listening goroutine's
}

// WatchRequests starts watching for requested runs of job: it LISTENs on
// the Store's session (or a connection of its own taken from the Store's
// pool; see listener), unless listening is off or the Store has neither.
// It returns once
// listening (or within the retry interval), asking for a first look,
// which covers the requests made before. Close it when done.
func (s *Store) WatchRequests(ctx context.Context, job string) *RequestWatch {
	w := &RequestWatch{wake: make(chan struct{}, 1), done: make(chan struct{}), l: s.newListener(job)}
	w.look.Store(true)
	if !s.canListen() {
		close(w.done)
		return w
	}
	ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if w.l.open(ctx) {
		w.listening.Store(true)
		// Before the scheduler starts: its one statement is part of the
		// start, not of the quiet between scheduled times.
		w.l.sendProbe(ctx)
	}
	go w.listen(ctx)
	return w
}

// listen keeps the listening connection while ctx lasts: on every
// reconnection it asks for a look, as a request may have gone unannounced
// meanwhile.
func (w *RequestWatch) listen(ctx context.Context) {
	defer close(w.done)
	l := w.l
	for again := false; ctx.Err() == nil; again = true {
		if again && l.open(ctx) {
			w.listening.Store(true)
			w.woke()
		}
		if l.pooled {
			l.store.sayDeaf(l.job, "waiting for requested runs")
			return
		}
		if l.listening() {
			l.sendProbe(ctx)
			for w.heard(ctx) {
			}
			w.listening.Store(false)
			l.close(ctx)
			if ctx.Err() != nil {
				return
			}
			w.woke()
			if l.probe.lost() {
				l.store.sayDeaf(l.job, "waiting for requested runs")
				return
			}
			l.store.log.Debug().Str("job", l.job).Msg("listening connection for requested runs lost; polling for now")
		}
		t := time.NewTimer(l.store.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// heard waits for one announcement, for up to a renew interval (or the
// probe's deadline), and reports whether the connection is still good:
// not when the probe went unheard. A request wakes the scheduler; a
// release of the lease only when a request waits for it.
// A quiet interval ends with a ping: a connection that died without a
// word (a cut cable, a crashed host) is noticed then, not never, and an
// idle scheduler's database contact stays as recent as a standby's, so
// that its health check holds between scheduled times.
func (w *RequestWatch) heard(ctx context.Context) bool {
	l := w.l
	payload, err := l.await(ctx, jitter(l.store.cfg.RenewInterval))
	switch {
	case err != nil || l.probe.lost():
		return false
	case payload == "":
		if err := l.ping(ctx); err != nil {
			return false
		}
		l.store.cfg.observer.Reached()
		return true
	}
	if _, request := l.store.requestChannel(l.job); payload == request || payload == l.job && w.look.Load() {
		w.woke()
	}
	return true
}

// Woken is ready when there may be a request to look for; a nil watch's
// never is.
func (w *RequestWatch) Woken() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.wake
}

// Look reports whether to look for requests now, and consumes the wake-up:
// true after Again, or always while not listening.
func (w *RequestWatch) Look() bool {
	if w == nil {
		return false
	}
	return w.look.Swap(false) || !w.listening.Load()
}

// Listening reports whether announcements reach the watch now; when not,
// the caller polls.
func (w *RequestWatch) Listening() bool { return w != nil && w.listening.Load() }

// Again asks for a look at the next step (a request waits, or may): it
// does not wake the caller.
func (w *RequestWatch) Again() {
	if w != nil {
		w.look.Store(true)
	}
}

// woke asks for a look now.
func (w *RequestWatch) woke() {
	w.look.Store(true)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Close stops watching and closes the listening connection.
func (w *RequestWatch) Close() {
	if w == nil {
		return
	}
	if w.cancel != nil {
		w.cancel()
	}
	<-w.done
}
