package cmdutil

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/runner"
)

// Exit statuses of leasewrap besides the child's own, after the shell's and
// sysexits.h's conventions. docs/exit-status.md lists the same.
const (
	// ExitNotFound: status and release found no such job or no live lease;
	// history --output found no run that kept output.
	ExitNotFound = 1
	// ExitUsage (EX_USAGE): bad command line or configuration.
	ExitUsage = 64
	// ExitUnavailable (EX_UNAVAILABLE): the lease store could not be reached
	// or used before the child started (also --require-replicated with no
	// standby to confirm the lease); for the read-only subcommands, the
	// lease table does not exist.
	ExitUnavailable = 69
	// ExitIOErr (EX_IOERR): a subcommand's output could not be written
	// (check answers 3, UNKNOWN, instead; trigger, whose request is then
	// recorded and stands, logs it and exits 0).
	ExitIOErr = 74
	// ExitLeaseLost (EX_TEMPFAIL): the lease was lost while the child ran
	// (the child was stopped) or between two --retries attempts, or it was
	// in doubt when the child was to start (a take answered past its
	// budget), and the child never started.
	ExitLeaseLost = 75
	// ExitWaitTimeout: --wait-timeout passed without becoming leader, as
	// timeout(1) exits.
	ExitWaitTimeout = 124
	// ExitTimedOut: the command ran past --max-runtime and was stopped, as
	// timeout(1) exits; the log line and the history tell it from
	// exitWaitTimeout.
	ExitTimedOut = 124
	// ExitSoftware (EX_SOFTWARE): an action failed with an error that has
	// no status of its own, which is a bug in leasewrap, not the user's
	// mistake. (126 and 127, COMMAND cannot run, are runner.StartError's.)
	ExitSoftware = 70
	// ExitSignalBase plus N: the child, or leasewrap before the child
	// started, was ended by signal N.
	ExitSignalBase = runner.StatusSignalBase
)

// ExitError carries leasewrap's exit status out of an action, so that
// deferred releases run before the process exits. err, when set, is the one
// line to tell the user; a nil err means everything was logged.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitWith is an exit status with nothing more to say.
func ExitWith(code int) error { return &ExitError{Code: code} }

// Usagef returns an EX_USAGE error with a one-line message.
func Usagef(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// internalError is an error an action returned without an exit status:
// every failure a user can cause or fix has one, so this is a bug.
type internalError struct{ err error }

func (e *internalError) Error() string {
	return fmt.Sprintf("internal error (a bug in leasewrap, please report it): %v", e.err)
}

func (e *internalError) Unwrap() error { return e.err }

// WithStatus marks what action returns without an exit status as an
// internalError, so that ExitCode can tell a bug from urfave/cli's own
// errors, which come before any action runs. The error is logged, in the
// format the command's settings ask for, or else said in one line; either
// way through a redactor for the connection string the command was given.
func WithStatus(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := action(c)
		var exit *ExitError
		var start *runner.StartError
		if err == nil || errors.As(err, &exit) || errors.As(err, &start) {
			return err
		}
		secrets := redact.New(c.String("database-url"))
		err = &internalError{err: secrets.Wrap(err)}
		if o, bad := ParseStoreOptions(NewSettings(c)); bad == nil {
			log := NewLogger(c.App.ErrWriter, o, secrets)
			log.Error().Err(err).Msg("internal error")
			return ExitWith(ExitSoftware)
		}
		return &ExitError{Code: ExitSoftware, Err: err}
	}
}

// ExitCode is the status for an action's error: its own code (EX_SOFTWARE
// for a bug, see WithStatus), 126/127 for a command that cannot run, and
// EX_USAGE for anything urfave/cli returned (a flag or argument it could
// not parse).
func ExitCode(err error) (int, error) {
	var exit *ExitError
	var start *runner.StartError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		return exit.Code, exit.Err
	case errors.As(err, &start):
		return start.Status, start
	default:
		return ExitUsage, err
	}
}

// ExitStatus is one line of leasewrap's exit status table: a status, or a
// description of one, and when it is returned.
type ExitStatus struct {
	Code    string
	Meaning string
}

// ExitStatuses is the exit status table of the man page, in its order.
func ExitStatuses() []ExitStatus {
	return []ExitStatus{
		{"COMMAND's own status", "when this instance held the lease and ran COMMAND; with --retries, the last attempt's"},
		{"128+N", "COMMAND was ended by signal N, or leasewrap was, before COMMAND started or between --retries attempts"},
		{"0, or --skip-exit-code", "when another instance holds the lease"},
		{fmt.Sprint(ExitUsage), "a mistake in the command line or the environment, an --http-addr that cannot be listened on, --slots other than the job's, or a --once line's --schedule (or zone data) other than the job's; for release --force, a holder that renewed within the TTL, without --yes"},
		{fmt.Sprint(ExitUnavailable), "the database could not be reached or used, or the table is not a lease table, or --require-replicated found no standby to confirm the lease; COMMAND did not run (a --wait standby that cannot reach the database, finds it read-only, or finds no standby streaming under --require-replicated keeps trying instead, and so does a scheduler without --once that cannot reach the database or finds it read-only at its start). For status, history, release, exporter and trigger: the lease table does not exist; for history and migrate: the run history cannot be read; for trigger: no scheduler took the request while the lease was free, or the job is paused (the request was withdrawn)"},
		{fmt.Sprint(ExitLeaseLost), "the lease was lost while COMMAND ran (COMMAND was stopped) or between two --retries attempts, or it was in doubt when COMMAND was to start (a take answered past its time budget) and COMMAND never ran"},
		{fmt.Sprint(ExitWaitTimeout), "--wait-timeout passed before this instance became the leader (a scheduler: before it reached its database), or COMMAND ran past --max-runtime and was stopped"},
		{fmt.Sprint(runner.StatusNotExecutable), "COMMAND was found but is not executable"},
		{fmt.Sprint(runner.StatusNotFound), "COMMAND was not found"},
		{fmt.Sprint(ExitNotFound), "status or release: no such job, or no live lease of that holder; history --output: no run kept output; check: WARNING (the job is paused); trigger: the job has no schedule recorded"},
		{fmt.Sprint(ExitLastRunFailed), "status --fail-on-error: a job shown is failing; check: CRITICAL"},
		{fmt.Sprint(CheckUnknown), "check: UNKNOWN, it cannot tell"},
		{fmt.Sprint(ExitIOErr), "a subcommand could not write its output (check answers 3 instead)"},
		{fmt.Sprint(ExitSoftware), "an internal error, a bug in leasewrap, logged as \"internal error\" (please report it)"},
	}
}

// ExitLastRunFailed is status --fail-on-error's status when a job shown is
// judged failing.
const ExitLastRunFailed = 2

// check exits as Nagios and Icinga plugins do.
const (
	CheckOK       = 0
	CheckWarning  = 1
	CheckCritical = 2
	CheckUnknown  = 3
)
