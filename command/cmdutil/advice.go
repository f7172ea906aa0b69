package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redbite/leasewrap/lease"
)

// Advised returns err with what to do about the facts lease refuses a
// run for, in the words of the command line: the flags every instance
// of a job must agree on, and the subcommand or statement that changes
// what the job has recorded. Package lease states the facts alone (a
// *lease.ScheduleError, *lease.SlotsError or *lease.NotScheduledError);
// any other error is returned as it is.
func Advised(err error) error {
	var (
		sched        *lease.ScheduleError
		slots        *lease.SlotsError
		notScheduled *lease.NotScheduledError
	)
	switch {
	case errors.As(err, &sched) && sched.ZoneData:
		return &advisedError{err, ": every instance of a job must compute the same times; give them all the same zone data " +
			"(the same tzdata package, or ZONEINFO naming one copy); to move the job to this host's, stop the instances with the other, then " +
			RescheduleCommand(sched.Job, sched.Want)}
	case errors.As(err, &sched):
		return &advisedError{err, ": start every instance of it with the same --schedule and --timezone; to change the job's schedule, " +
			RescheduleCommand(sched.Job, sched.Want)}
	case errors.As(err, &slots):
		return &advisedError{err, slotsAdvice(slots)}
	case errors.As(err, &notScheduled) && notScheduled.NoRow:
		return &advisedError{err, " (start its schedulers with --schedule first)"}
	case errors.As(err, &notScheduled):
		return &advisedError{err, " (start its schedulers with --schedule)"}
	}
	return err
}

// slotsAdvice says how to end a refusal of --slots.
func slotsAdvice(e *lease.SlotsError) string {
	switch e.Found {
	case 0:
		return ": rename one of the two jobs"
	case 1:
		return ": start every instance of it with the same --slots (a job with one slot may move to more while no instance holds it)"
	}
	return fmt.Sprintf(": start every instance of it with --slots %d; to change the number, stop them all, then "+
		"UPDATE %s SET slots = NULL WHERE job_name = '%s'", e.Found, e.Table, strings.ReplaceAll(e.Job, "'", "''"))
}

// advisedError is an error of lease followed by its advice.
type advisedError struct {
	err    error
	advice string
}

func (e *advisedError) Error() string { return e.err.Error() + e.advice }

func (e *advisedError) Unwrap() error { return e.err }

// RescheduleCommand is the command line that gives job the schedule spec
// (canonical, as schedule.Schedule.Spec gives it), to copy.
func RescheduleCommand(job, spec string) string {
	return "leasewrap reschedule --job " + shellWord(job) + " --schedule '" + spec + "'"
}

// shellWord quotes a job's name for a command line to copy.
func shellWord(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
