package runner

import (
	"errors"
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
	// Grace is how long the child gets between SIGTERM and SIGKILL.
	Grace() time.Duration
	// KillIn is how long until the child must be dead whatever the grace:
	// SIGKILL is due once it is not positive.
	KillIn() time.Duration
}

// Config sets how a child is supervised. The deadlines come from the Lease.
type Config struct {
	// Signals are forwarded to the child's process group.
	Signals <-chan os.Signal
	// Log receives the child's start, stop and exit.
	Log zerolog.Logger
	// Started, when set, is called once the child runs.
	Started func()
	// MaxRuntime, when positive, is how long the child may run: it is then
	// stopped as for a lost lease (SIGTERM, SIGKILL after the grace).
	MaxRuntime time.Duration
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
	// Signal is the signal asking leasewrap to end that stopped the child,
	// or nil.
	Signal os.Signal
	// TimedOut is set when the child ran past MaxRuntime and was stopped.
	TimedOut bool
	// Ran is how long the child ran, from its start to its exit, and
	// Ended when it exited.
	Ran   time.Duration
	Ended time.Time
}

// pollInterval is how often a stopping child's deadlines are checked, and
// whether processes of the run that are not leasewrap's children (whose
// end it is not told of) are gone.
const pollInterval = 20 * time.Millisecond

// pollClock ticks every pollInterval for the stop of the processes a child
// left behind; a variable so that tests can drive it.
var pollClock = defaultPollClock

// stopWaits, when set, is called each time a stop waits with processes of
// the run alive: tests know then that the next check comes from a reap or
// a tick.
var stopWaits func()

func defaultPollClock() (tick <-chan time.Time, stop func()) {
	t := time.NewTicker(pollInterval)
	return t.C, t.Stop
}

// Run starts cmd in its own process group and waits for it while the lease
// holds. A lease already in doubt is not used: the child does not start.
// cmd's stdin, stdout and stderr must be files (or nil).
//
// Signals from cfg.Signals are forwarded to the child's group. When the
// lease's Done closes, or a signal that asks to end (signals.Ends) arrives,
// the child is stopped: the group gets SIGTERM (or that signal), and SIGKILL
// after the grace or at the lease's deadline less the margin, whichever
// comes first. The status is still the child's own; a lost lease shows in
// Result.Lost.
//
// On Linux Run makes the process a child subreaper, so that orphans of the
// run (a `setsid cmd &`, a double fork) stay its descendants, and all
// waiting for children goes through signals.ProcessReaper: nothing else in
// the process may wait for a child (exec.Cmd.Wait, os.Process.Wait).
// Before Run returns, whether the child exited on its own or was stopped,
// every process left of the run, in the group or not, gets SIGTERM and
// SIGKILL at the same deadlines and is reaped: nothing of the run outlives
// the lease. Elsewhere only the child's process group can be found and
// stopped. An orphan cannot be traced to the run it came from: with several
// runs of s at once, it is stopped with the first that ends.
func (s *Supervisor) Run(cmd *exec.Cmd, l Lease, cfg Config) Result {
	log := cfg.Log
	select {
	case <-l.Done():
		log.Error().Err(l.Err()).Msg("not starting child: lease can no longer be guaranteed")
		return Result{Lost: l.Err()}
	default:
	}
	// A subreaper, and PID 1 where there is none, inherits orphans: then
	// one reaper owns all waiting for children.
	var reaper *signals.Reaper
	if err := signals.Subreaper(); err == nil || signals.NeedReaper() {
		reaper = signals.ProcessReaper()
	} else if !errors.Is(err, errors.ErrUnsupported) {
		log.Warn().Err(err).Msg("cannot become a subreaper; processes that leave the child's process group may outlive the lease")
	}
	attr, foreground := signals.ChildAttr()
	cmd.SysProcAttr = attr
	if foreground {
		// Also after a failed exec: the terminal was handed over before it.
		defer signals.ReclaimTerminal()
	}
	s.mu.Lock() // see Supervisor.mu
	waited, err := start(cmd, reaper)
	if err == nil {
		s.pgids[cmd.Process.Pid] = true
	}
	s.mu.Unlock()
	if err != nil {
		log.Error().Err(err).Msg("cannot start child")
		return Result{Status: startStatus(err)}
	}
	pgid := cmd.Process.Pid
	defer func() {
		s.mu.Lock()
		delete(s.pgids, pgid)
		s.mu.Unlock()
	}()
	log.Info().Int("pid", pgid).Msg("child started")
	if cfg.Started != nil {
		cfg.Started()
	}
	sv := &supervision{fam: &family{pgid: pgid, reaper: reaper, runs: s}, lease: l, cfg: cfg, log: log, started: time.Now()}
	return sv.run(waited)
}

// supervision is one running child: the loop that owns its end.
type supervision struct {
	fam     *family
	lease   Lease
	cfg     Config
	log     zerolog.Logger
	started time.Time

	lost     error
	signal   os.Signal
	timedOut bool
	stop     *stopper // set once the child is being stopped
	stopTick *time.Ticker
}

// run waits for the child's end while forwarding signals, stopping it when
// the lease ends or leasewrap is told to end, and killing it when due.
func (sv *supervision) run(waited <-chan unix.WaitStatus) Result {
	defer func() {
		if sv.stopTick != nil {
			sv.stopTick.Stop()
		}
	}()
	leaseDone := sv.lease.Done()
	var tick, maxRuntime <-chan time.Time
	if sv.cfg.MaxRuntime > 0 {
		t := time.NewTimer(sv.cfg.MaxRuntime - time.Since(sv.started))
		defer t.Stop()
		maxRuntime = t.C
	}
	for {
		select {
		case ws := <-waited:
			return sv.exited(ws)
		case <-maxRuntime:
			maxRuntime = nil
			sv.ranTooLong()
		case sig := <-sv.cfg.Signals:
			if s, ok := sig.(unix.Signal); ok {
				sv.signalled(s)
			}
		case <-leaseDone:
			leaseDone = nil
			sv.leaseEnded()
		case <-tick:
			sv.stop.check(sv.log)
		}
		if sv.stop != nil && tick == nil {
			sv.stopTick = time.NewTicker(pollInterval)
			tick = sv.stopTick.C
		}
	}
}

// exited logs the child's end and stops whatever of the run is left.
func (sv *supervision) exited(ws unix.WaitStatus) Result {
	ended := time.Now()
	res := Result{Started: true, Status: waitStatus(ws), Lost: sv.lost, Signal: sv.signal, TimedOut: sv.timedOut,
		Ran: ended.Sub(sv.started), Ended: ended}
	ev := sv.log.Info()
	if res.Status != 0 {
		ev = sv.log.Warn()
	}
	ev.Int("status", res.Status).Stringer("duration", res.Ran.Round(time.Millisecond)).Msg("child exited")
	if alive, _ := sv.fam.signal(0, 0); sv.stop == nil && alive {
		sv.log.Warn().Int("pgid", sv.fam.pgid).Msg("child left processes behind; stopping them")
		sv.stop = newStopper(sv.fam, sv.lease, unix.SIGTERM)
	}
	if sv.stop != nil {
		sv.stop.wait(sv.log)
	}
	return res
}

// signalled forwards s; the first signal that asks to end leasewrap also
// starts the stop, so a child that ignores it is killed after the grace.
func (sv *supervision) signalled(s unix.Signal) {
	if signals.Ends(s) && sv.signal == nil {
		sv.signal = s
	}
	if signals.Ends(s) && sv.stop == nil {
		sv.stop = newStopper(sv.fam, sv.lease, s) // signal first, then log
		grace := sv.lease.Grace()
		sv.log.Info().Str("signal", unix.SignalName(s)).Stringer("grace", grace).
			Msgf("received %s, stopping the command (grace %s)", unix.SignalName(s), grace)
		return
	}
	sv.fam.group(s) // a second ending signal too: the grace runs on
	sv.log.Debug().Str("signal", s.String()).Msg("forwarded signal")
}

// ranTooLong stops a child that ran past --max-runtime, as a lost lease does.
func (sv *supervision) ranTooLong() {
	if sv.stop != nil {
		return // already stopping: its clock runs on
	}
	sv.timedOut = true
	sv.stop = newStopper(sv.fam, sv.lease, unix.SIGTERM) // signal first, then log
	sv.log.Warn().Stringer("max_runtime", sv.cfg.MaxRuntime).Stringer("grace", sv.lease.Grace()).
		Msgf("stopping the command: it ran longer than --max-runtime %s (grace %s)", sv.cfg.MaxRuntime, sv.lease.Grace())
}

// leaseEnded starts the stop, or has a stop already under way for a signal
// send SIGTERM too, without moving its SIGKILL.
func (sv *supervision) leaseEnded() {
	sv.lost = sv.lease.Err()
	if sv.stop == nil {
		sv.stop = newStopper(sv.fam, sv.lease, unix.SIGTERM) // signal first, then log
	} else {
		sv.stop.term()
	}
	ev := sv.log.Error()
	if planned(sv.lost) {
		ev = sv.log.Warn()
	}
	ev.Err(sv.lost).Stringer("grace", sv.lease.Grace()).Msg("stopping child: lease can no longer be guaranteed")
}

// planned reports whether a lease ended by plan (an operator's release),
// which deserves a warning rather than an error.
func planned(err error) bool {
	var p interface{ Planned() bool }
	return errors.As(err, &p) && p.Planned()
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

// stopper ends a run's family of processes: a first signal at once (SIGTERM
// to all, or the signal leasewrap received to the group and SIGTERM to the
// rest), SIGKILL to all after the grace or when the lease is about to run
// out, whichever comes first.
type stopper struct {
	fam    *family
	lease  Lease
	first  unix.Signal // what the group got at termAt
	termAt time.Time
	killed bool
}

func newStopper(fam *family, l Lease, first unix.Signal) *stopper {
	fam.signal(first, unix.SIGTERM)
	return &stopper{fam: fam, lease: l, first: first, termAt: time.Now()}
}

// term sends SIGTERM to a group that got another signal first (the lease
// was lost after an outside SIGINT or SIGHUP), without moving the SIGKILL.
func (s *stopper) term() {
	if s.first != unix.SIGTERM && !s.killed {
		s.fam.group(unix.SIGTERM)
		s.first = unix.SIGTERM
	}
}

// due reports whether SIGKILL is due.
func (s *stopper) due() bool {
	return time.Since(s.termAt) >= s.lease.Grace() || s.lease.KillIn() <= 0
}

// check sends SIGKILL once it is due.
func (s *stopper) check(log zerolog.Logger) {
	if s.killed || !s.due() {
		return
	}
	log.Warn().Int("pgid", s.fam.pgid).Msg("child did not stop in time; sending SIGKILL")
	s.fam.signal(unix.SIGKILL, unix.SIGKILL)
	s.killed = true
}

// wait returns once no process of the family is left, killing them when
// due. It checks every poll, for deadlines, for any process forked
// meanwhile, and for processes that are not leasewrap's children; and, in
// between, at each reap of a child whether that was the last process of
// the run, so the run ends as soon as it is reaped. A process SIGKILL
// cannot end (not ours to signal, or stuck in the kernel), or, where only
// the process group is known, a zombie no one reaps, would keep it
// waiting, so the wait ends a second after SIGKILL.
func (s *stopper) wait(log zerolog.Logger) {
	tick, stop := pollClock()
	defer stop()
	var giveUp time.Time
	for {
		var sig unix.Signal
		if s.killed {
			sig = unix.SIGKILL
		}
		alive, reaped := s.fam.signal(sig, sig)
		if !alive {
			return
		}
		s.check(log)
		if s.killed {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(time.Second)
			} else if time.Now().After(giveUp) {
				log.Error().Int("pgid", s.fam.pgid).Msg("processes of the run remain after SIGKILL (not ours to kill?); they may outlive the lease")
				return
			}
		}
		if s.sleep(tick, reaped) {
			return
		}
	}
}

// sleep waits for the next poll, and reports whether a reap meanwhile
// proved the family gone. A reap costs a wait4 and a kill, not a read of
// the process table: a family that reaps often waits for the poll as
// before.
func (s *stopper) sleep(tick <-chan time.Time, reaped <-chan struct{}) (gone bool) {
	if stopWaits != nil {
		stopWaits()
	}
	for {
		select {
		case <-tick:
			return false
		case <-reaped:
			if gone, reaped = s.fam.gone(); gone {
				return true
			}
		}
	}
}
