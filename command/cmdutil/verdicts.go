package cmdutil

import (
	"context"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/timefmt"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/schedule"
)

// JudgeJobs reads the verdicts of job's (every job's, when "") summaries:
// a job's state as every view shows it. Status reads the lease table
// alone, and answers without the history: when the summaries cannot be
// read, each job's verdict is unknown, with the reason.
func JudgeJobs(ctx context.Context, read *inspect.Reader, job string, some bool) Verdicts {
	v := Verdicts{ByJob: map[string]inspect.Verdict{}}
	if !some {
		return v
	}
	var (
		sums []inspect.JobSummary
		err  error
	)
	if job != "" {
		var js inspect.JobSummary
		js, err = read.Summary(ctx, job, monitor.RunsWindow)
		sums = []inspect.JobSummary{js}
	} else {
		sums, err = read.Summaries(ctx, monitor.RunsWindow)
	}
	if err != nil {
		v.Err = err
		return v
	}
	for _, s := range sums {
		v.ByJob[s.Job] = s.Verdict
	}
	return v
}

// Verdicts are the jobs' verdicts status shows, or why none could be read.
type Verdicts struct {
	ByJob map[string]inspect.Verdict
	Err   error
}

// Of is job's verdict; an unknown one when it could not be read.
func (v Verdicts) Of(job string) inspect.Verdict {
	if vd, ok := v.ByJob[job]; ok {
		return vd
	}
	reason := "not judged"
	if v.Err != nil {
		reason = v.Err.Error()
	}
	return inspect.Verdict{Job: job, State: inspect.StateUnknown, Reason: reason}
}

// Next is job's next scheduled time: the verdict's, on the database
// clock, or by the host's when there is none.
func (v Verdicts) Next(j inspect.JobStatus) *time.Time {
	if vd, ok := v.ByJob[j.Job]; ok {
		return timefmt.UTC(vd.Next)
	}
	return nextScheduled(j.Schedule, time.Now())
}

// nextScheduled is a job's next scheduled time after now, by the
// schedule recorded with it; nil without one (or one this version cannot
// read).
func nextScheduled(spec *string, now time.Time) *time.Time {
	if spec == nil {
		return nil
	}
	if next, ok := schedule.NextOf(*spec, now); ok {
		return timefmt.UTC(&next)
	}
	return nil
}
