package web

import (
	"slices"
	"time"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schedule"
)

// leaseView is a job's lease as / and its own page show it, gathered from
// the rows of its slots.
type leaseView struct {
	// State is the strongest of the rows' states (see states), "" when
	// the job has no lease row.
	State   lease.State
	Holders []string // of the live rows, in the rows' order
	Slots   int
	// Schedule is the schedule the rows record ("": none).
	Schedule string
	// Next is the job's next scheduled time, nil without a schedule: the
	// database's (the verdict's) when known, else by the host's clock.
	Next *time.Time
	// Paused is the job's pause (leasewrap pause), nil when it runs.
	Paused *lease.Pause
	// Queue is the job's standbys in the order a release hands the lease
	// on (its first slot's row's).
	Queue []lease.Standby
}

// add gathers one lease row of the job; now is the host's clock, for
// Next until the verdict gives the database's.
func (v *leaseView) add(s inspect.JobStatus, now time.Time) {
	v.Slots = max(v.Slots, s.Slots, 1)
	if s.Live() && !slices.Contains(v.Holders, s.Holder) {
		v.Holders = append(v.Holders, s.Holder)
	}
	v.State = lease.StrongerState(v.State, s.State)
	if s.Paused != nil && v.Paused == nil {
		v.Paused = s.Paused
	}
	if s.Slot <= 1 {
		v.Queue = s.Queue
	}
	if s.Schedule != nil && v.Schedule == "" {
		v.Schedule = *s.Schedule
		if next, ok := schedule.NextOf(*s.Schedule, now); ok && v.Next == nil {
			v.Next = &next
		}
	}
}

// judged takes the next scheduled time from the verdict, which reads it by
// the database's clock, as check and status do.
func (v *leaseView) judged(vd inspect.Verdict) {
	if vd.Next != nil {
		v.Next = vd.Next
	}
}

// holders writes the holders, one a line, a dash for none.
func holders(b *html, hs []string) {
	if len(hs) == 0 {
		b.raw(`—`)
	}
	for i, h := range hs {
		if i > 0 {
			b.raw(`<br>`)
		}
		b.text(h)
	}
}

// queue writes the standbys in order, each with its priority, its pin,
// how it hears a release and since when it waits.
func queue(b *html, q []lease.Standby) {
	b.raw(`<ol class="queue">`)
	for _, s := range q {
		b.raw(`<li><span class="holder">`)
		b.text(s.Holder)
		b.raw(`</span>: priority `)
		b.int(int64(s.Priority))
		if s.Pinned {
			b.raw(`, pinned`)
		}
		if s.Listening {
			b.raw(`, listening`)
		} else {
			b.raw(`, polling`)
		}
		b.raw(`, waiting since `)
		b.time(s.Since)
		b.raw(` UTC</li>`)
	}
	b.raw(`</ol>`)
}
