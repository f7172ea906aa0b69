package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schema"
)

// DB is the part of *pgxpool.Pool and *pgx.Conn a Store uses. For long
// runs, ConnectSession's one connection (what the command uses) or a pool:
// both replace a broken connection on the next statement, and a standby
// listens on the session's connection itself, or on one taken from the
// pool.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// MaxJobLen is the longest job name accepted, in bytes.
const MaxJobLen = 200

// Store hands out leases on jobs from one PostgreSQL table.
type Store struct {
	db    DB
	cfg   config
	table pgx.Identifier
	log   zerolog.Logger
	sql   statements
	// channel is where releases are announced (NOTIFY) to standbys.
	channel string

	// checked is nil until the tables are known to be right, then what
	// was found, in one value: a take that sees the tables checked also
	// sees whether runs are recorded. migrating serialises the slow path
	// (catalog and DDL); the fast path never waits for it.
	checked   atomic.Pointer[tablesChecked]
	migrating sync.Mutex

	// objects names the tables and the fencing function.
	objects schema.Objects
}

// tablesChecked is what a Store found once its tables were checked.
type tablesChecked struct {
	// hist holds the statements that also write the history (nil: runs
	// are not recorded).
	hist *historyStatements
	// functions: the lease table's own functions are there (see
	// functions_sql.go).
	functions bool
}

// hist returns the statements that also write the history, or nil when
// runs are not recorded (or the tables are not checked yet).
func (s *Store) hist() *historyStatements {
	if c := s.checked.Load(); c != nil {
		return c.hist
	}
	return nil
}

// dropHistory stops recording runs, and reports whether this call did.
func (s *Store) dropHistory() bool {
	for {
		c := s.checked.Load()
		if c == nil || c.hist == nil {
			return false
		}
		if s.checked.CompareAndSwap(c, &tablesChecked{functions: c.functions}) {
			return true
		}
	}
}

// New returns a Store that keeps leases in db. It checks the options but does
// not touch the database; the table is created or upgraded on first use (or
// by Migrate).
func New(db DB, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	table, err := ParseTable(cfg.table)
	if err != nil {
		return nil, err
	}
	cfg.Timings = TimingsFor(cfg.ttl, cfg.timings)
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.holdFor < 0 {
		return nil, fmt.Errorf("invalid hold-for %s: must not be negative", cfg.holdFor)
	}
	if cfg.holder == "" {
		cfg.holder = DefaultHolder()
	}
	if cfg.slots < 1 || cfg.slots > MaxSlots {
		return nil, fmt.Errorf("invalid slots %d: must be 1-%d", cfg.slots, MaxSlots)
	}
	if cfg.historyKeep < 0 {
		return nil, fmt.Errorf("invalid history keep %s: must not be negative", cfg.historyKeep)
	}
	return &Store{
		db:      db,
		cfg:     cfg,
		table:   table,
		log:     cfg.log,
		sql:     newStatements(schema.For(table)),
		channel: channelFor(table),
		objects: withHotFunctions(schema.For(table)),
	}, nil
}

// Table returns the lease table's name as given.
func (s *Store) Table() string { return s.cfg.table }

// TTL returns the lease duration.
func (s *Store) TTL() time.Duration { return s.cfg.TTL }

// ParseTable splits "table" or "schema.table" into an identifier. Names are
// taken literally (case kept) and later quoted; they must be 1-63 bytes of
// printable UTF-8, in a schema that is not PostgreSQL's own.
func ParseTable(name string) (pgx.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("invalid table %q: use \"table\" or \"schema.table\"", name)
	}
	for _, p := range parts {
		if p == "" || len(p) > 63 || !utf8.ValidString(p) || strings.ContainsFunc(p, unprintable) {
			return nil, fmt.Errorf("invalid table %q: each part must be 1-63 bytes of printable UTF-8, as in %q", name, DefaultTable)
		}
	}
	if len(parts) == 2 && systemSchema(parts[0]) {
		return nil, fmt.Errorf("invalid table %q: schema %q belongs to PostgreSQL, use one of your own, as in %q", name, parts[0], "public."+DefaultTable)
	}
	return pgx.Identifier(parts), nil
}

// CheckJob reports whether job can name an existing lease: 1-200 bytes of
// UTF-8 without NUL, as PostgreSQL's text stores, other than "." and ".."
// (which a path or a URL such as the web page's /jobs/NAME reads as a
// directory) and other than only white space (which no one can tell from
// another such name in a table). Reading commands use it, so that a row
// written by hand can still be looked at; a new lease takes CheckNewJob.
func CheckJob(job string) error {
	if job == "" || len(job) > MaxJobLen || !utf8.ValidString(job) || strings.ContainsRune(job, 0) {
		return fmt.Errorf("invalid job name %.40q (%d bytes): must be 1-%d bytes of UTF-8, as in \"nightly_report\"", job, len(job), MaxJobLen)
	}
	if job == "." || job == ".." || strings.TrimFunc(job, unicode.IsSpace) == "" {
		return fmt.Errorf("invalid job name %q: \".\", \"..\" and names of only spaces are refused; any other 1-%d bytes of UTF-8 will do, as in \"nightly_report\"", job, MaxJobLen)
	}
	return nil
}

// CheckNewJob reports whether job may name a lease to take: CheckJob's rule,
// no white space at either end (CheckEdges), printable characters only (a name shows up in terminals, logs and
// metrics), and no '#', which SlotRow uses to name a job's other slots: a
// job "x#2" would take slot 2 of job "x".
func CheckNewJob(job string) error {
	if err := CheckJob(job); err != nil {
		return err
	}
	if err := CheckEdges("job name", job); err != nil {
		return err
	}
	if strings.ContainsRune(job, '#') {
		return fmt.Errorf("invalid job name %q: '#' is kept for slot rows (%q is slot 2 of job %q), use another character", job, SlotRow("x", 2), "x")
	}
	if i := strings.IndexFunc(job, unprintable); i >= 0 {
		return fmt.Errorf("invalid job name %q: control and invisible characters (%U) are not allowed", job, []rune(job[i:])[0])
	}
	return nil
}

// MaxHolderLen is the longest holder id accepted, in bytes: as long as a job
// name, and far longer than DefaultHolder's.
const MaxHolderLen = 200

// CheckHolder reports whether id can be a holder id: 1-200 bytes of
// printable UTF-8, without white space at either end (CheckEdges).
func CheckHolder(id string) error {
	if id == "" || len(id) > MaxHolderLen || !utf8.ValidString(id) {
		return fmt.Errorf("invalid holder id %.40q (%d bytes): must be 1-%d bytes of UTF-8, as in %q", id, len(id), MaxHolderLen, "web-1")
	}
	if err := CheckEdges("holder id", id); err != nil {
		return err
	}
	if i := strings.IndexFunc(id, unprintable); i >= 0 {
		return fmt.Errorf("invalid holder id %q: control and invisible characters (%U) are not allowed", id, []rune(id[i:])[0])
	}
	return nil
}

// unprintable is a character a terminal acts on or hides: controls (ESC,
// CR, U+009B), format characters (U+202E) and spaces other than ' '.
func unprintable(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }

// systemSchema reports whether PostgreSQL keeps schema for itself: its
// catalogs, and every name it reserves with the pg_ prefix (pg_catalog,
// pg_toast, pg_temp_N).
func systemSchema(schema string) bool {
	return schema == "information_schema" || strings.HasPrefix(schema, "pg_")
}

// DefaultHolder returns "<hostname>-<pid>-<random>". The random part matters:
// in containers every entrypoint is PID 1 and hostnames repeat.
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// TryAcquire takes the lease on job if it is free or expired, in one
// statement on the database clock. When another holder's lease is live it
// returns a *HeldError. The fencing token rises on every acquisition and
// never repeats, even when the row is lost (see Lease.Token).
func (s *Store) TryAcquire(ctx context.Context, job string) (*Lease, error) {
	return s.tryAcquire(ctx, s.db, job)
}

// tryAcquire is TryAcquire on the given connection (a standby's own).
//
// A take whose budget ran out is tried once more, with a budget of its
// own: the database may have been fine and this process stalled (frozen
// by SIGSTOP, suspended, starved of CPU), since the local clock counts
// the stall. If the answer that came too late had taken the lease, the
// second try finds it live under this holder's own id: that lease cannot
// be used (its deadline is unknown) nor safely handed back (another
// instance may share the id), so the error wraps ErrTakeInDoubt and the
// lease expires by itself.
func (s *Store) tryAcquire(ctx context.Context, db querier, job string) (*Lease, error) {
	if err := CheckJob(job); err != nil {
		return nil, err
	}
	budget := s.cfg.TTL - s.cfg.StopBefore()
	began := s.cfg.clock.Now()
	l, err := s.tryAcquireOnce(ctx, db, job, budget)
	if !timedOut(err) || ctx.Err() != nil {
		return l, err
	}
	s.log.Warn().Str("job", job).Stringer("budget", budget).
		Stringer("elapsed", (s.cfg.clock.Now() - began).Round(time.Millisecond)).Err(err).
		Msg("no answer to the take within its budget (this process stalled, or the database was slow); trying once more")
	l, err = s.tryAcquireOnce(ctx, db, job, budget)
	var held *HeldError
	if errors.As(err, &held) && held.Holder == s.cfg.holder && held.Slots <= 1 {
		return nil, fmt.Errorf("lease %q is held under this instance's own id %q (token %d) for another %s: %w",
			job, held.Holder, held.Token, held.ExpiresIn.Round(time.Millisecond), ErrTakeInDoubt)
	}
	return l, err
}

// takeRow reads takeAnswer: the lease taken, with its token, or the row
// that kept it from being taken (its token, holder, time left, state,
// slots and pause).
type takeRow struct {
	Taken           bool
	Token           int64
	Holder, State   *string
	ExpiresInMicros *int64
	Slots           int
	pauseRow
}

// tryAcquireOnce is one try of tryAcquire: a take within budget, and when
// the tables want the catalog read first (see errTablesUnchecked), that,
// outside the budget, and the take again.
func (s *Store) tryAcquireOnce(ctx context.Context, db querier, job string, budget time.Duration) (*Lease, error) {
	l, err := s.takeWithin(ctx, db, job, budget)
	if !errors.Is(err, errTablesUnchecked) {
		return l, err
	}
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	return s.takeWithin(ctx, db, job, budget)
}

// takeWithin is one take of job within budget.
func (s *Store) takeWithin(ctx context.Context, db querier, job string, budget time.Duration) (*Lease, error) {
	t0 := s.cfg.clock.Now()
	// A lease that takes longer than this to come back would be in doubt
	// (Done closed) before work could start.
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	db, done, err := s.replicated(ctx, db, job)
	defer done()
	if err != nil {
		return nil, err
	}
	if s.cfg.slots > 1 {
		if s.checked.Load() == nil {
			return nil, errTablesUnchecked
		}
		return s.tryAcquireSlots(ctx, db, job, t0)
	}
	var row takeRow
	checkErr, err := s.take(ctx, db, s.takeArgs(job), into(&row))
	if checkErr != nil {
		return nil, checkErr
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("cannot acquire lease %q: %w", job, pgerr.Classify(err))
		s.cfg.observer.Failed(err)
		return nil, err
	}
	s.cfg.observer.Contacted()
	switch {
	case err == nil && row.Taken:
		if err := s.tooLate(ctx, job, 1, row.Token, time.Time{}, End{}, t0, budget); err != nil {
			return nil, err
		}
		return s.confirmed(ctx, db, newLease(s, job, row.Token, t0+s.cfg.TTL))
	case err == nil && row.Slots != 1:
		return nil, &SlotsError{Job: job, Table: s.table.Sanitize(), Want: 1, Found: row.Slots}
	case err == nil && row.Paused:
		return nil, row.markPaused(&HeldError{Job: job})
	case err == nil && *row.ExpiresInMicros > 0:
		return nil, &HeldError{Job: job, Holder: *row.Holder, Token: row.Token, State: State(*row.State),
			ExpiresIn: time.Duration(*row.ExpiresInMicros) * time.Microsecond}
	default:
		// The snapshot showed a free lease that another instance took first
		// (or a row deleted by hand): read who holds it now.
		return nil, s.held(ctx, db, job)
	}
}

// tooLate is nil when a take of job's slot started at t0 (local clock)
// answered within budget. An answer read after the budget ran out (the
// process stalled with it on the way) took the lease, by its token, too
// late to use: it is handed back at once, with end (and the scheduled
// time at), without a keeper that would report it lost, and the error
// says so.
func (s *Store) tooLate(ctx context.Context, job string, slot int, token int64, at time.Time, end End, t0, budget time.Duration) error {
	took := s.cfg.clock.Now() - t0
	if took < budget {
		return nil
	}
	late := &Lease{store: s, job: job, row: SlotRow(job, slot), slot: slot, token: token, scheduledAt: at}
	_ = late.releaseRow(context.WithoutCancel(ctx), 0, end)
	return fmt.Errorf("cannot take lease %q: the answer came after %s: %w", job, took.Round(time.Millisecond), context.DeadlineExceeded)
}

// held reads the current holder after an acquisition lost a race.
func (s *Store) held(ctx context.Context, db querier, job string) error {
	e, err := s.readHolder(ctx, db, job)
	if err != nil {
		return err
	}
	return e
}

// readHolder reads who holds job's lease and for how long, with a plain
// SELECT. A job without a row has a HeldError with no holder and no time
// left: free (deleted by hand, or never taken). A paused job's says so
// (see markPaused).
func (s *Store) readHolder(ctx context.Context, db querier, job string) (*HeldError, error) {
	row, err := queryOne[holderRow](ctx, db, s.sql.holder, pgx.StrictNamedArgs{"job": job})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return &HeldError{Job: job}, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read holder of lease %q: %w", job, pgerr.Classify(err))
	}
	return row.held(job), nil
}

// holderRow reads holderSQL.
type holderRow struct {
	Holder                     string
	Token                      int64
	ExpiresAt                  time.Time
	ReleasedAt, LastFinishedAt *time.Time
	pauseRow
}

// held is the row read as job's holder, with the time left, the state
// and the pause.
func (row holderRow) held(job string) *HeldError {
	return row.markPaused(&HeldError{Job: job, Holder: row.Holder, Token: row.Token, ExpiresIn: row.ExpiresAt.Sub(row.Now),
		State: schema.StateOf(row.ExpiresAt, row.ReleasedAt, row.LastFinishedAt)})
}

// pausedBy marks, in a standby's last logged holder, a pause's author.
const pausedBy = "\x00paused:"

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// failureLog is what a standby logged at warn of its failures since at.
type failureLog struct {
	at     time.Time
	causes map[string]bool // SQLSTATEs, "" for errors without one
}

// logFailure logs a standby's failed attempt at warn the first time, and
// again for each new cause (a connection ended by a restart, then a
// server that came back read-only), then at most once a
// failureLogInterval per cause (a failover may be under way, and may take
// long); at debug in between.
func (s *Store) logFailure(err error, job string, last *failureLog) {
	cause := pgerr.SQLState(err)
	if time.Since(last.at) >= failureLogInterval {
		*last = failureLog{at: time.Now(), causes: map[string]bool{}}
	} else if last.causes[cause] {
		s.log.Debug().Err(err).Str("job", job).Msg("still cannot use the lease store; retrying")
		return
	}
	last.causes[cause] = true
	s.log.Warn().Err(err).Str("job", job).Stringer("next_log_in", failureLogInterval).
		Msg("cannot use the lease store; retrying")
}

// failureLogInterval spaces the log lines of a standby that keeps failing.
const failureLogInterval = time.Minute

// Acquire waits until it holds the lease on job, or ctx ends. It reads the
// catalog once, up front (a standby lives long; see hotpath.go), then looks
// at the lease with a plain SELECT and tries to take it only when it looks
// free or expired, so that standing by writes nothing.
//
// At the head of the job's queue it listens for releases (LISTEN/NOTIFY)
// and takes the lease at once when one comes; behind the head it polls,
// every pollBehind retry intervals (every one right behind the head). A
// listening standby looks only just after the expiry it last
// saw (a leader that crashed, or whose release was not announced: it
// renewed meanwhile, or used hold-for) and after its connection was
// replaced; every renew interval it pings the connection with a message
// that is no transaction (standby.ping), so that it costs the database one
// commit, and no transaction id, per expiry it waits out, not one per
// renew interval. A standby that cannot listen polls at the head of the
// queue too, every retry interval, and any standby also looks just after
// the expiry it saw.
// An error on the first attempt is returned at once (a wrong address or
// missing privilege should not look like a long wait); later database errors
// are logged and retried every retry interval.
func (s *Store) Acquire(ctx context.Context, job string) (*Lease, error) {
	if err := CheckJob(job); err != nil {
		return nil, err
	}
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	if err := s.standbysReady(ctx, job); err != nil {
		return nil, err
	}
	l, err := s.lookThenTake(ctx, s.db, job)
	if timedOut(err) && ctx.Err() == nil {
		// The look's budget ran out: this process may have stalled (see
		// tryAcquire); an outage shows on the second try too.
		l, err = s.lookThenTake(ctx, s.db, job)
	}
	var held *HeldError
	if err == nil || !errors.As(err, &held) {
		return l, err
	}
	return s.standBy(ctx, job, held)
}

// standBy waits for the lease on job, held as held says, in the job's
// queue: it takes the lease when it is handed to it, or when it is
// released or expires with nobody live ahead of it. At the head of the
// queue it is woken by a release's NOTIFY where it can listen; behind it,
// or where it cannot listen, it polls (see standbyWait).
func (s *Store) standBy(ctx context.Context, job string, held *HeldError) (*Lease, error) {
	sb := s.newStandby(ctx, job)
	q := &queueEntry{sb: sb, id: newEntryID()}
	sb.entry = q.id
	q.enter(ctx)
	defer func() {
		// Out of the queue before the command starts: its release must
		// not find this standby's entry still there.
		q.leave(ctx)
		// Closing the listening connection waits for nothing the caller
		// needs: a new leader starts its work meanwhile.
		go sb.close(context.WithoutCancel(ctx))
	}()
	// Once listening, look again at once: a release that came before the
	// LISTEN would not be announced to this standby, and its place in
	// the queue says whether it keeps listening (listenAtHead).
	recheck := sb.listening()
	lastHolder := ""
	var lastFailure failureLog
	failed, ahead := false, -1
	for {
		started := sb.listenAtHead(ctx, q, ahead)
		wait := s.standbyWait(sb, held != nil, failed, ahead)
		if held == nil && !failed && ahead > 0 && q.turnLeft > 0 {
			// The entries ahead lose their turn then: look at once.
			wait = min(wait, q.turnLeft+time.Millisecond)
		}
		if started || recheck {
			wait, recheck = 0, false
		}
		if held != nil {
			lastHolder = s.sayStandingBy(job, held, lastHolder)
			// Try again just after the expiry it observed, if that comes first.
			wait = min(wait, held.ExpiresIn+time.Millisecond)
		}
		payload, err := sb.wait(ctx, max(wait, time.Millisecond))
		if err != nil {
			return nil, err
		}
		var l *Lease
		place := ahead
		n, handoff := parseHandoff(payload)
		switch {
		case handoff && n.holder != s.cfg.holder:
			// Handed to the entry before this one: it has until its
			// first expiry to adopt the lease, then this one is next.
			held, failed = &HeldError{Job: job, Holder: n.holder, ExpiresIn: n.first, State: StateHeld}, false
			continue
		case handoff:
			// Handed to this holder id: adopt it without looking first. An
			// instance sharing the id, still queued, adopts nothing.
			if l, err = q.adopt(ctx); l == nil && err == nil {
				l, place, err = s.lookThenTakeQueued(ctx, sb, q)
			}
		default:
			// A release that freed the lease without handing it on (the
			// job was paused, the release forced), a resume, or the end
			// of the wait: look. The head of the queue takes a free
			// lease; the others see its turn and wait, even after a
			// resume, which starts the turns again.
			l, place, err = s.lookThenTakeQueued(ctx, sb, q)
		}
		held, failed = nil, false
		switch {
		case err == nil && l != nil:
			return l, nil
		case err == nil:
			ahead = place
		case errors.As(err, &held):
			ahead = place
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !retryable(err):
			return nil, err
		default:
			failed = true
			s.logFailure(err, job, &lastFailure)
		}
	}
}

// standbyWait is how long a standby waits before it looks again, unless
// an announcement or the expiry it saw comes first: after a failure, a
// retry interval; listening (at the head of the queue), up to the expiry
// (a release is announced, and the wait pings the connection every renew
// interval); polling, a retry interval at the head of the queue and
// pollBehind of them behind it, except right behind the head for a
// standby that may listen: the lease may be handed to it before it knew
// it was the head, and had started listening (see listenAtHead), and it
// adopts the lease at its next look.
func (s *Store) standbyWait(sb *standby, held, failed bool, ahead int) time.Duration {
	switch {
	case failed:
		return jitter(s.cfg.RetryInterval)
	case sb.listening() && (held || ahead == 0):
		return s.cfg.TTL
	case sb.listening():
		// Not looked yet, or still listening behind the head.
		return jitter(s.cfg.RetryInterval)
	case ahead > 1 || ahead == 1 && !sb.mayListen():
		return jitter(pollBehind * s.cfg.RetryInterval)
	default:
		return jitter(s.cfg.RetryInterval)
	}
}

// lookThenTakeQueued is a queued standby's look: it adopts a lease handed
// to it, and takes a free one only when no live entry is ahead of its own
// (ahead counts them: the head of the queue takes it).
func (s *Store) lookThenTakeQueued(ctx context.Context, sb *standby, q *queueEntry) (_ *Lease, ahead int, err error) {
	handed, ahead, err := q.look(ctx)
	switch {
	case handed:
		l, err := q.adopt(ctx)
		return l, 0, err
	case err != nil || ahead > 0:
		return nil, ahead, err
	}
	l, err := s.tryAcquire(ctx, sb.db(), sb.job)
	return l, 0, err
}

// sayStandingBy logs why a standby waits when that changed since last
// (the holder, or who paused the job), and returns what it said it for.
func (s *Store) sayStandingBy(job string, held *HeldError, last string) string {
	switch {
	case held.Paused != nil && last != pausedBy+held.Paused.By:
		s.log.Info().Str("job", job).Str("paused_by", held.Paused.By).Str("reason", held.Paused.Reason).
			Msg("standing by: the job is paused")
		return pausedBy + held.Paused.By
	case held.Paused == nil && held.Holder != last:
		s.log.Info().Str("job", job).Str("current_holder", held.Holder).
			Stringer("expires_in", held.ExpiresIn.Round(time.Millisecond)).Msg("standing by: lease held by another instance")
		return held.Holder
	}
	return last
}
