package scheduler

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/schedule"
)

// Config is what a scheduler needs: the job and its schedule, the store
// that claims the schedule's times, and the Host that runs the command.
type Config struct {
	// Store claims each scheduled time and takes the lease for its run.
	Store *lease.Store
	// Job is the job's name, and Schedule the schedule this instance runs
	// it on.
	Job      string
	Schedule *schedule.Schedule
	// CatchUp says what to do with the times nobody ran on time.
	CatchUp schedule.CatchUp
	// Once runs the time just due, then ends, as a crontab line does
	// (--once). Without it, a scheduler never ends by itself.
	Once bool
	// Timings are the lease's: a failure is tried again every retry
	// interval, and no sleep between two looks is longer than a TTL.
	Timings lease.Timings
	// WaitTimeout, when positive, bounds the standing by for a database
	// that cannot be reached when the scheduler starts (ErrWaitTimeout).
	WaitTimeout time.Duration
	// HistoryKeep is how long runs are kept (0: for ever). Claims are kept
	// as long, and at least the catch-up window.
	HistoryKeep time.Duration
	// Signals are the signals leasewrap receives: one that asks it to end
	// (signals.Ends) ends the scheduler between runs.
	Signals <-chan os.Signal
	// Log is the instance's logger; the scheduler adds the schedule to
	// the lines it writes.
	Log zerolog.Logger
	// Monitor hears of the loop's turns, the leases of its runs and a
	// database it cannot reach.
	Monitor *monitor.Monitor
	// Host runs the command, and waits as the main command's other modes
	// do.
	Host Host
}

// Host is the main command's side of a scheduler: the command it runs
// under each lease, and what the scheduler shares with a run that is not
// scheduled.
type Host interface {
	// RunLease runs the command under l and hands l back. It returns the
	// run's exit status as an error (nil for 0), and the signal to end
	// leasewrap that stopped the run, if one did: the scheduler then ends.
	RunLease(l *lease.Lease) (ended os.Signal, err error)
	// WatchSignals runs fn with a context that a signal to end leasewrap
	// cancels, and returns that signal, if one came, with fn's error.
	WatchSignals(ctx context.Context, fn func(context.Context) error) (os.Signal, error)
	// Reach waits for the database after err, a failure that waiting may
	// mend (lease.Awaitable). It returns nil once the database answers and
	// takes writes, else what ended the wait: an error that waiting will
	// not mend, or the cause of ctx's end.
	Reach(ctx context.Context, err error) error
	// Abandon hands back l unused, taken just as sig, a signal to end
	// leasewrap, came: the history records its time stopped by sig. It
	// logs how that went on log.
	Abandon(l *lease.Lease, sig os.Signal, log zerolog.Logger)
	// Advised is err, a refusal of the job's lease row, with what an
	// operator can do about it in the host's words.
	Advised(err error) error
	// Reschedule is the command an operator runs to give job the
	// schedule spec, for a log line to name.
	Reschedule(job, spec string) string
}

// ErrNothingRun ends a scheduler with Config.Once that ran nothing: the
// time due was run, skipped or missed elsewhere, or none was due. It has
// said so in its log.
var ErrNothingRun = errors.New("nothing to run")

// ErrWaitTimeout ends a scheduler that stood by at its start for a
// database it could not reach for longer than Config.WaitTimeout.
var ErrWaitTimeout = errors.New("gave up standing by for the database")

// RefusedError ends a scheduler that the job's lease row refuses: it
// records another number of slots, or, with Config.Once, another schedule
// (without it, the scheduler stands by instead). Nothing was taken.
type RefusedError struct {
	// Err is the store's refusal: a *lease.ScheduleError or a
	// *lease.SlotsError.
	Err error
}

func (e *RefusedError) Error() string { return "refusing the schedule: " + e.Err.Error() }

func (e *RefusedError) Unwrap() error { return e.Err }

// UnavailableError ends a scheduler that cannot use the lease store: the
// database refuses it for good, the table is not a lease table, or, with
// Config.Once, any failure. It has not been reported yet: Log is the
// logger of the part of the loop that failed, whose fields the report
// carries.
type UnavailableError struct {
	Err error
	Log zerolog.Logger
}

func (e *UnavailableError) Error() string { return "lease store unavailable: " + e.Err.Error() }

func (e *UnavailableError) Unwrap() error { return e.Err }

// Run runs the job at each time of its schedule, on this instance or
// another (the claims table decides), and the runs leasewrap trigger
// requests. A scheduler whose schedule the job changed under it stands by,
// running nothing, until the schedule is its own again.
//
// Run ends when a signal to end leasewrap comes: with nil between runs,
// else with the status of the run it stopped. With Config.Once it ends
// once the time just due is accounted for: with the run's status, or
// ErrNothingRun. It ends early with a *RefusedError, an *UnavailableError
// or ErrWaitTimeout. ctx is the parent of every statement; its end does
// not end the loop.
func Run(ctx context.Context, cfg Config) error {
	sc := newScheduler(cfg, &dbClock{local: lease.BootClock()})
	for {
		err := sc.runRegistered(ctx)
		if !errors.Is(err, errScheduleChanged) {
			return err
		}
		// The job's schedule was changed under this scheduler (leasewrap
		// reschedule): it stands by until its own is the job's again.
	}
}
