package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schedule"
	"github.com/redbite/leasewrap/schema"
)

// Outcomes of a claim that are not history outcomes.
const (
	// ClaimRun: a scheduler took the lease for the time and ran it.
	ClaimRun = "run"
	// ClaimManual: the time was run by hand (reserved for manual runs).
	ClaimManual = "manual"
	// ClaimedElsewhere is a Claim's Outcome when the time's claim was
	// committed by another instance while the take ran: which one is not
	// known.
	ClaimedElsewhere = "claimed"
)

// ErrScheduleMismatch is matched (errors.Is) by every *ScheduleError.
var ErrScheduleMismatch = errors.New("schedule mismatch")

// ErrClaimsUnavailable is matched (errors.Is) by the errors that say the
// claims table cannot be used, which scheduled runs need.
var ErrClaimsUnavailable = schema.ErrClaimsUnavailable

// ScheduleError means the job's schedule recorded in its lease row is not
// this instance's: nothing was taken. Every scheduled instance of a job
// must have the same schedule and time zone. It states the facts; what
// to do about them is the caller's to say, in its own words.
type ScheduleError struct {
	Job   string
	Want  string // this instance's, canonical
	Found string // the job's recorded one
	// ZoneData: the schedules are the same, but the zone data this
	// instance computes its times with are not those of the instance
	// that recorded it: the two would run at different times.
	ZoneData bool
}

func (e *ScheduleError) Error() string {
	if e.ZoneData {
		return fmt.Sprintf("job %q runs on schedule %q computed with other zone data than this host's (another offset for %s in the years ahead)",
			e.Job, e.Found, zoneOf(e.Found))
	}
	return fmt.Sprintf("job %q runs on schedule %q (recorded in its lease row), this instance has %q", e.Job, e.Found, e.Want)
}

// zoneOf names the zone of a canonical spec.
func zoneOf(spec string) string {
	if z, ok := strings.CutPrefix(spec, "CRON_TZ="); ok {
		z, _, _ = strings.Cut(z, " ")
		return z
	}
	return "its zone"
}

// Unwrap makes errors.Is(err, ErrScheduleMismatch) true.
func (e *ScheduleError) Unwrap() error { return ErrScheduleMismatch }

// Registration is what Register found.
type Registration struct {
	// Now is the database clock when it answered.
	Now time.Time
	// Latest is the job's mark: every scheduled time up to it is
	// accounted for (run, skipped or missed), whatever the claims table
	// still holds (zero: none is).
	Latest time.Time
}

// ZoneRules gives the fingerprint of the zone data a schedule's times are
// computed with, over the years from year on (schedule.Schedule.ZoneRules;
// "": its times depend on no zone data). Nil: none matters.
type ZoneRules func(year int) string

// Register prepares job to run on the schedule spec (a canonical spec,
// as schedule.Schedule.Spec gives, time zone included) computed with the
// zone data rules says: it creates or checks the tables (the claims table
// too), records spec and the zone data's fingerprint with the job if no
// schedule is recorded, and refuses with a *ScheduleError when another
// schedule is, or the same computed with other zone data.
func (s *Store) Register(ctx context.Context, job, spec string, rules ZoneRules) (Registration, error) {
	if err := CheckJob(job); err != nil {
		return Registration{}, err
	}
	if err := s.ensureScheduleTables(ctx, false); err != nil {
		return Registration{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	var zone *string
	if rules != nil {
		if own := rules(time.Now().Year()); own != "" {
			zone = &own
		}
	}
	row, err := queryOne[registerRow](sctx, s.db, s.sql.sched.register, pgx.StrictNamedArgs{"job": job, "spec": spec, "holder": s.cfg.holder, "zone": zone})
	if err != nil {
		err = fmt.Errorf("cannot register the schedule of %q: %w", job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return Registration{}, err
	}
	s.cfg.observer.Contacted()
	if row.Schedule != nil && *row.Schedule != spec {
		return Registration{}, &ScheduleError{Job: job, Want: spec, Found: *row.Schedule}
	}
	if row.Zone != nil && rules != nil {
		// Compared over the years the recorded one covers.
		year, err := schedule.ZoneRulesYear(*row.Zone)
		if own := rules(year); err != nil || own != *row.Zone {
			return Registration{}, &ScheduleError{Job: job, Want: spec, Found: *row.Schedule, ZoneData: true}
		}
	}
	reg := Registration{Now: row.Now}
	if row.Latest != nil {
		reg.Latest = *row.Latest
	}
	return reg, nil
}

// markRow reads scheduleMarkSQL: the job's schedule, the database clock
// and the job's mark.
type markRow struct {
	Schedule *string
	Now      time.Time
	Latest   *time.Time
}

// registerRow reads registerSQL: markRow, and the zone data's
// fingerprint recorded.
type registerRow struct {
	markRow
	Zone *string
}

// Claim is the answer to a scheduled take (TakeScheduled).
type Claim struct {
	// Lease is set when this instance took the lease for the time and
	// claimed it: run the command, then Finish the lease.
	Lease *Lease
	// Outcome and By say how the time was accounted for when it was not
	// this instance's to run: ClaimRun, ClaimManual, OutcomeMissed or
	// OutcomeSkipped (possibly written by this take: the lease was held),
	// and by which holder. Empty when it was not accounted for.
	Outcome, By string
	// Held is the lease's holder when it was live and the time was not
	// accounted for (a late time, which a held lease does not skip).
	Held *HeldError
	// Now is the database clock when it answered, and Latest the job's
	// latest claimed time then.
	Now, Latest time.Time
}

// TakeScheduled takes the lease on job for the scheduled time at and
// claims the time, in one statement (see takeScheduledSQL): spec is the
// job's canonical schedule. When the lease is held and skipHeld is set,
// the time is recorded as skipped (once, whoever records it). A time not
// yet due on the database clock, or already claimed, is not taken; nor is
// a lease taken for another time. It refuses with a *ScheduleError or a
// *SlotsError (nothing taken) when the job's row says another schedule or
// slots. Register must have succeeded first.
func (s *Store) TakeScheduled(ctx context.Context, job, spec string, at time.Time, skipHeld bool) (Claim, error) {
	tk, end, err := s.startSchedulerTake(ctx, job)
	defer end()
	if err != nil {
		return Claim{}, err
	}
	var row scheduledRow
	args := s.takeArgs(job)
	args["at"], args["spec"], args["skip_held"] = at, spec, skipHeld
	err = s.sendSchedulerTake(tk, s.sql.sched.take, s.sql.sched.takeRecording, args, into(&row), s.claimConflict)
	if s.claimConflict(err) {
		// A claim committed after the statement's snapshot: the time was
		// accounted for elsewhere, and the take was rolled back with it.
		s.cfg.observer.Contacted()
		return Claim{Outcome: ClaimedElsewhere}, nil
	}
	if err != nil {
		err = fmt.Errorf("cannot take lease %q for %s: %w", job, at.UTC().Format(time.RFC3339), pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return Claim{}, err
	}
	s.cfg.observer.Contacted()
	c := Claim{Now: row.Now}
	if row.Latest != nil {
		c.Latest = *row.Latest
	}
	if !row.Taken {
		return row.undecided(c, job, spec, s.table.Sanitize())
	}
	c.Lease, err = s.scheduledLease(tk.ctx, tk.db, job, row.Token, at, tk.t0, tk.budget)
	if c.Lease == nil {
		return Claim{}, err
	}
	return c, err
}

// schedulerTake is a scheduler's take in flight, of a scheduled time or of
// a requested run: it answers within the take's budget, on the connection
// that confirms replication where that is required.
type schedulerTake struct {
	ctx    context.Context
	db     querier
	t0     time.Duration // the clock before the statement was sent
	budget time.Duration
}

// startSchedulerTake begins a scheduler's take of job; end, always set,
// ends it.
func (s *Store) startSchedulerTake(ctx context.Context, job string) (tk schedulerTake, end func(), err error) {
	tk.budget = s.cfg.TTL - s.cfg.StopBefore()
	ctx, cancel := context.WithTimeout(ctx, tk.budget)
	db, done, err := s.replicated(ctx, s.db, job)
	tk.ctx, tk.db, tk.t0 = ctx, db, s.cfg.clock.Now()
	return tk, func() { done(); cancel() }, err
}

// sendSchedulerTake runs the take, recording where runs are recorded and
// else plain, reading its row with read (see queryTake).
func (s *Store) sendSchedulerTake(tk schedulerTake, plain, recording string, args pgx.StrictNamedArgs, read reader, conflict func(error) bool) error {
	query := plain
	if s.hist() != nil {
		query = recording
	}
	return s.queryTake(tk.ctx, tk.db, query, plain, args, read, conflict)
}

// scheduledRow is the answer of a scheduler's take (takeScheduledAnswer).
type scheduledRow struct {
	Taken                   bool
	Token                   int64
	Holder, State, Schedule *string
	ExpiresInMicros         *int64
	Slots                   int
	Claim, ClaimedBy        *string
	Now                     time.Time
	Latest                  *time.Time
}

// undecided is the claim of a take that took no lease: the time claimed
// already, a schedule or slots that differ from the job's (an error), the
// lease held, or nothing decided yet.
func (r *scheduledRow) undecided(c Claim, job, spec, table string) (Claim, error) {
	switch {
	case r.Claim != nil:
		c.Outcome, c.By = *r.Claim, deref(r.ClaimedBy)
	case r.Schedule != nil && *r.Schedule != spec:
		return c, &ScheduleError{Job: job, Want: spec, Found: *r.Schedule}
	case r.Slots != 1:
		return c, &SlotsError{Job: job, Table: table, Want: 1, Found: r.Slots}
	case r.Holder != nil && r.ExpiresInMicros != nil && *r.ExpiresInMicros > 0:
		c.Held = &HeldError{Job: job, Holder: *r.Holder, Token: r.Token, State: State(*r.State),
			ExpiresIn: time.Duration(*r.ExpiresInMicros) * time.Microsecond}
	}
	// Not due yet, held at a late time, or a take another instance made
	// after the snapshot: undecided.
	return c, nil
}

// scheduledLease is the lease a scheduler's take (started at t0 on the
// local clock, with budget to answer) got for the time at, confirmed by
// the standbys when that is asked for. An answer that came too late to
// be used (see takeWithin) is handed back, the time recorded as a run
// that could not start, and the lease is nil.
func (s *Store) scheduledLease(ctx context.Context, db querier, job string, token int64, at time.Time, t0, budget time.Duration) (*Lease, error) {
	if err := s.tooLate(ctx, job, 1, token, at, End{Outcome: OutcomeCouldNotStart}, t0, budget); err != nil {
		return nil, err
	}
	l := newLease(s, job, token, t0+s.cfg.TTL)
	l.scheduledAt = at
	return s.confirmed(ctx, db, l)
}

// ensureScheduleTables creates or checks the tables, the claims table
// too, as a scheduler's start does; again as checkSchema's.
func (s *Store) ensureScheduleTables(ctx context.Context, again bool) error {
	if err := s.checkSchema(ctx, again); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	change, err := s.objects.MigrateClaims(ctx, s.db)
	if change != "" {
		s.log.Info().Str("table", s.cfg.table).Msg(change)
	}
	if errors.Is(err, schema.ErrRequestsIndexUnavailable) {
		// Slower, not wrong: said once per start, and scheduling goes on.
		s.log.Warn().Err(err).Str("table", s.cfg.table).Msg("requested runs are looked for without their index")
		return nil
	}
	return err
}

// queryTake runs a scheduler's take (see queryTakeOnce). A scheduler runs
// for months: when an operator dropped one of its tables under it, it
// makes them again, as its start did, and tries once more, rather than
// fail every time until restarted.
func (s *Store) queryTake(ctx context.Context, db querier, query, plain string, args pgx.StrictNamedArgs, read reader, conflict func(error) bool) error {
	err := s.queryTakeOnce(ctx, db, query, plain, args, read, conflict)
	if pgerr.SQLState(err) != pgerr.CodeUndefinedTable || ctx.Err() != nil {
		return err
	}
	s.log.Warn().Err(pgerr.Classify(err)).Str("table", s.cfg.table).Msg("a table is gone; making it again")
	if rerr := s.ensureScheduleTables(ctx, true); rerr != nil {
		return err
	}
	return s.queryTakeOnce(ctx, db, query, plain, args, read, conflict)
}

// queryTakeOnce runs a scheduler's take, query (recording, or plain),
// reading its row with read. A scheduler's pooled connection idled since its last time, and
// the pool does not ping idle connections (see Connect): one that broke
// meanwhile fails once, and the take is sent again on a fresh one (had
// the first committed, the second finds its claim, and takes nothing).
// A recording take that fails for the history's sake (and not for
// conflict's) falls back to plain, as every recording statement does.
func (s *Store) queryTakeOnce(ctx context.Context, db querier, query, plain string, args pgx.StrictNamedArgs, read reader, conflict func(error) bool) error {
	err := queryRow(ctx, db, query, args, read)
	if connectionLost(err) && ctx.Err() == nil {
		err = queryRow(ctx, db, query, args, read)
	}
	if err != nil && query != plain && !conflict(err) {
		err = s.withoutHistory(ctx, err, func() error { return queryRow(ctx, db, plain, args, read) })
	}
	return err
}

// claimConflict reports whether err is the unique violation of a claim
// that another transaction committed first.
func (s *Store) claimConflict(err error) bool {
	claims := schema.ClaimsTable(s.table)
	return pgerr.UniqueViolationOn(err, claims[len(claims)-1])
}

// Missed is a time RecordMissed records; First, when set,
// is the first of the times it stands for (a long outage in one row).
type Missed struct {
	At, First time.Time
}

// RecordMissed records the times with outcome (OutcomeMissed, or
// OutcomeSkipped for times that came due while this instance's own run
// held the lease), with a history row each when runs are recorded,
// leaving alone any already accounted for (see Registration.Latest) or
// not yet due on the database clock. It returns how many it recorded, the
// database clock and the job's mark: every time up to it is accounted for,
// and the caller plans on from it. A summary (Missed.First) that reaches
// back to or before the mark is refused with all the times given: plan
// again from the mark.
func (s *Store) RecordMissed(ctx context.Context, job, outcome string, times []Missed) (n int, now, latest time.Time, err error) {
	ats := make([]time.Time, len(times))
	firsts := make([]*time.Time, len(times))
	for i, m := range times {
		ats[i] = m.At
		if !m.First.IsZero() {
			firsts[i] = &times[i].First
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.TTL-s.cfg.StopBefore())
	defer cancel()
	var row missedRow
	args := pgx.StrictNamedArgs{"job": job, "holder": s.cfg.holder, "ats": ats, "firsts": firsts, "outcome": outcome}
	read := into(&row)
	sql := s.sql.sched
	query := sql.missed
	if s.hist() != nil {
		query = sql.missedRecording
	}
	record := func() error {
		err := queryRow(ctx, s.db, query, args, read)
		if connectionLost(err) && ctx.Err() == nil {
			// As in TakeScheduled: a connection that broke while idle. The
			// claims make a second recording harmless.
			err = queryRow(ctx, s.db, query, args, read)
		}
		if err != nil && query != sql.missed {
			err = s.withoutHistory(ctx, err, func() error { return queryRow(ctx, s.db, sql.missed, args, read) })
		}
		return err
	}
	err = record()
	if err == nil && !row.HasRow {
		// An operator deleted the job's lease row, whose lock decides
		// between instances: make it again, and record.
		if _, err = s.db.Exec(ctx, sql.freeRow, pgx.StrictNamedArgs{"job": job, "holder": s.cfg.holder}); err == nil {
			err = record()
		}
	}
	if err != nil {
		err = fmt.Errorf("cannot record missed times of %q: %w", job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return 0, row.Now, latest, err
	}
	s.cfg.observer.Contacted()
	if row.Latest != nil {
		latest = *row.Latest
	}
	return int(row.Recorded), row.Now, latest, nil
}

// missedRow reads missedAnswer: how many times were recorded, the
// database clock, the job's mark, and whether the job has a lease row.
type missedRow struct {
	Recorded int64
	Now      time.Time
	Latest   *time.Time
	HasRow   bool
}

// BootClock returns the local clock leases keep their deadlines on: it
// counts time the machine spent suspended, and wall-clock steps do not
// move it.
func BootClock() Clock { return bootClock{} }

// PruneClaims deletes a batch of job's claims older than keep (0: none),
// always keeping the latest. A pruned time stays accounted for: it is
// before the job's mark.
func (s *Store) PruneClaims(ctx context.Context, job string, keep time.Duration) error {
	if keep <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReleaseTimeout)
	defer cancel()
	if _, err := s.db.Exec(ctx, s.sql.sched.pruneClaims, pgx.StrictNamedArgs{"job": job, "keep": keep.Microseconds()}); err != nil {
		return fmt.Errorf("cannot prune the claims of %q: %w", job, pgerr.Classify(err))
	}
	return nil
}

// ScheduledAt returns the scheduled time the lease was taken for, or the
// zero time for a lease taken without a schedule.
func (l *Lease) ScheduledAt() time.Time { return l.scheduledAt }

// scheduledArg is the scheduled time as a statement's parameter: NULL for
// a lease taken without a schedule.
func (l *Lease) scheduledArg() *time.Time {
	if l.scheduledAt.IsZero() {
		return nil
	}
	return &l.scheduledAt
}

// rescheduleSQL switches a job to another schedule: @job, @spec the
// canonical spec. The zone data's fingerprint is left for the first
// instance to register to record (with the same schedule, that is all it
// does), and the mark and scheduled_since move to now: the new
// schedule's times before the switch are owed nothing. It answers the schedule it replaced (NULL:
// none).
const rescheduleSQL = `WITH was AS (
  SELECT schedule FROM {lease} WHERE job_name = @job::text FOR UPDATE),
switched AS (
  UPDATE {lease} AS l SET schedule = @spec::text, schedule_zone = NULL,
    accounted_through = CASE WHEN schedule IS DISTINCT FROM @spec::text
      THEN greatest(accounted_through, ` + latestClaim + `, now()) ELSE accounted_through END,
    scheduled_since = ` + scheduledSince + `
  WHERE job_name = @job::text)
SELECT schedule FROM was`

// Reschedule makes spec (canonical, as schedule.Schedule.Spec gives) the
// job's schedule from now on, and returns the one it replaced ("": none).
// Schedulers with the old one stand by from their next take, those with
// spec run its times after now. The old schedule's times that came due
// and nobody accounted for yet are recorded missed first, so that every
// time stays accounted for. A job without a lease row is refused with
// ErrNoJob.
func (s *Store) Reschedule(ctx context.Context, job, spec string) (string, error) {
	if err := CheckJob(job); err != nil {
		return "", err
	}
	if err := s.ensureScheduleTables(ctx, false); err != nil {
		return "", err
	}
	mark, err := queryOne[markRow](ctx, s.db, s.sql.scheduleMark, pgx.StrictNamedArgs{"job": job})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("job %q has no lease row in %s: %w", job, s.table.Sanitize(), ErrNoJob)
	case err != nil:
		return "", fmt.Errorf("cannot reschedule %q: %w", job, pgerr.Classify(err))
	}
	if old, perr := schedule.Parse(deref(mark.Schedule), ""); perr == nil && deref(mark.Schedule) != spec && mark.Latest != nil {
		var owed []Missed
		for _, at := range old.Between(*mark.Latest, mark.Now, schedule.DefaultMaxMissed) {
			owed = append(owed, Missed{At: at})
		}
		if len(owed) > 0 {
			if _, _, _, err := s.RecordMissed(ctx, job, OutcomeMissed, owed); err != nil {
				return "", err
			}
		}
	}
	was, err := queryValue[*string](ctx, s.db, s.sql.reschedule, pgx.StrictNamedArgs{"job": job, "spec": spec})
	if err != nil {
		return "", fmt.Errorf("cannot reschedule %q: %w", job, pgerr.Classify(err))
	}
	return deref(was), nil
}
