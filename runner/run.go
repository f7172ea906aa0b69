package runner

import (
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/redbite/leasewrap/signals"
)

// Lease is what the runner needs of a held lease (*lease.Lease has it).
type Lease interface {
	// Done is closed when leadership can no longer be guaranteed.
	Done() <-chan struct{}
	// Err says why Done was closed.
	Err() error
	// Remaining is how long the lease is certainly still valid.
	Remaining() time.Duration
}

// Config sets how a child is supervised.
type Config struct {
	// Grace is the SIGTERM to SIGKILL delay.
	Grace time.Duration
	// Margin is how long before the lease's local deadline the child must be
	// dead (lease.SafetyMargin).
	Margin time.Duration
	// Signals are forwarded to the child's process group.
	Signals <-chan os.Signal
	// Log receives the child's start, stop and exit.
	Log zerolog.Logger
	// Reaper, when set, owns waiting for children (leasewrap as PID 1).
	Reaper *signals.Reaper
	// Started, when set, is called once the child runs.
	Started func()
}

// Result is how a child run ended.
type Result struct {
	// Started is false when the child never ran: the lease was already in
	// doubt (Lost is set), or it could not be executed (Status is 126/127).
	Started bool
	// Status is the child's own exit status, 128+N for a death by signal N,
	// or 126/127 when it could not be started.
	Status int
	// Lost is why the lease ended while the child ran, or nil.
	Lost error
}

// pollInterval is how often a stopping child's deadlines are checked.
const pollInterval = 20 * time.Millisecond

// Run starts cmd in its own process group and waits for it while the lease
// holds. When the lease's Done closes it sends SIGTERM to the group, and
// SIGKILL after the grace or at the lease's deadline less the margin,
// whichever comes first. Processes the child leaves behind in its group are
// stopped too before Run returns, so nothing of the run outlives the lease.
// A lease already in doubt is not used: the child does not start. cmd's
// stdin, stdout and stderr must be files (or nil).
func Run(cmd *exec.Cmd, l Lease, cfg Config) Result {
	log := cfg.Log
	select {
	case <-l.Done():
		log.Error().Err(l.Err()).Msg("not starting child: lease can no longer be guaranteed")
		return Result{Lost: l.Err()}
	default:
	}
	attr, foreground := signals.ChildAttr()
	cmd.SysProcAttr = attr
	if foreground {
		// Also after a failed exec: the terminal was handed over before it.
		defer signals.ReclaimTerminal()
	}
	waited, err := start(cmd, cfg.Reaper)
	if err != nil {
		log.Error().Err(err).Msg("cannot start child")
		return Result{Status: startStatus(err)}
	}
	started := time.Now()
	pgid := cmd.Process.Pid
	log.Info().Int("pid", pgid).Msg("child started")
	if cfg.Started != nil {
		cfg.Started()
	}

	leaseDone := l.Done()
	var (
		lost     error
		stop     *stopper
		tick     <-chan time.Time
		stopTick *time.Ticker
	)
	defer func() {
		if stopTick != nil {
			stopTick.Stop()
		}
	}()
	for {
		select {
		case ws := <-waited:
			res := Result{Started: true, Status: waitStatus(ws), Lost: lost}
			ev := log.Info()
			if res.Status != 0 {
				ev = log.Warn()
			}
			ev.Int("status", res.Status).Stringer("duration", time.Since(started).Round(time.Millisecond)).Msg("child exited")
			if signals.GroupAlive(pgid) {
				log.Warn().Int("pgid", pgid).Msg("child left processes in its group; stopping them")
				if stop == nil {
					stop = newStopper(pgid, l, cfg)
				}
				stop.wait(log)
			}
			return res
		case sig := <-cfg.Signals:
			if s, ok := sig.(unix.Signal); ok {
				_ = signals.Group(pgid, s)
			}
			log.Debug().Str("signal", sig.String()).Msg("forwarded signal")
		case <-leaseDone:
			leaseDone = nil
			lost = l.Err()
			stop = newStopper(pgid, l, cfg) // signal first, then log
			log.Error().Err(lost).Stringer("grace", cfg.Grace).Msg("stopping child: lease can no longer be guaranteed")
			stopTick = time.NewTicker(pollInterval)
			tick = stopTick.C
		case <-tick:
			stop.check(log)
		}
	}
}

// start starts cmd and returns the channel its wait status arrives on:
// from the reaper if there is one, else from cmd.Wait.
func start(cmd *exec.Cmd, reaper *signals.Reaper) (<-chan unix.WaitStatus, error) {
	if reaper != nil {
		return reaper.Start(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := make(chan unix.WaitStatus, 1)
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		waited <- unix.WaitStatus(ws)
	}()
	return waited, nil
}

// stopper ends a process group: SIGTERM at once, SIGKILL after the grace or
// when the lease is about to run out, whichever comes first.
type stopper struct {
	pgid   int
	lease  Lease
	cfg    Config
	termAt time.Time
	killed bool
}

func newStopper(pgid int, l Lease, cfg Config) *stopper {
	_ = signals.Group(pgid, unix.SIGTERM)
	return &stopper{pgid: pgid, lease: l, cfg: cfg, termAt: time.Now()}
}

// check sends SIGKILL once it is due.
func (s *stopper) check(log zerolog.Logger) {
	if s.killed {
		return
	}
	if time.Since(s.termAt) >= s.cfg.Grace || s.lease.Remaining() <= s.cfg.Margin {
		log.Warn().Int("pgid", s.pgid).Msg("child did not stop in time; sending SIGKILL")
		_ = signals.Group(s.pgid, unix.SIGKILL)
		s.killed = true
	}
}

// wait polls until the group is gone, killing it when due. Processes that
// cannot be reaped by anyone (zombies under a PID 1 that does not reap)
// would keep the group alive, so the wait ends a little after SIGKILL.
func (s *stopper) wait(log zerolog.Logger) {
	var giveUp time.Time
	for signals.GroupAlive(s.pgid) {
		s.check(log)
		if s.killed {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(time.Second)
			} else if time.Now().After(giveUp) {
				log.Error().Int("pgid", s.pgid).Msg("processes of the child's group remain after SIGKILL (not ours to kill?); they may outlive the lease")
				return
			}
		}
		time.Sleep(pollInterval)
	}
}
