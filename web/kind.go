package web

import (
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/lease"
)

// Kinds of run, as the pages colour them. Each is a CSS class (k-NAME) and
// the value of a run box's data-outcome attribute. What each means is in
// kinds.
const (
	kindSucceeded     = "succeeded"
	kindFailed        = "failed"
	kindSignalled     = "signalled"
	kindLost          = "lost"
	kindTimedOut      = "timed_out"
	kindStopped       = "stopped"
	kindCouldNotStart = "could_not_start"
	kindRunning       = "running"
	kindMissed        = "missed"
	kindSkipped       = "skipped"
	kindPaused        = "paused"
	kindOther         = "other"
)

// word is a word the pages show and what it means, as the legend says it.
type word struct{ name, meaning string }

// kinds are the kinds of run, in the order of the legends (good to bad,
// then the scheduled times that were not run).
var kinds = []word{
	{kindSucceeded, "exited 0"},
	{kindRunning, "holds the lease now"},
	{kindStopped, "leasewrap was asked to stop it (a signal to leasewrap, leasewrap release): neither a success nor a failure"},
	{kindFailed, "exited non-zero"},
	{kindSignalled, "ended by a signal (exit 128+N)"},
	{kindTimedOut, "stopped for running past --max-runtime (exit 124)"},
	{kindCouldNotStart, "the lease was taken but the command could not be executed"},
	{kindLost, "the lease was lost mid-run, or its holder never came back"},
	{kindMissed, "a scheduled time no instance ran: not a run"},
	{kindSkipped, "a scheduled time passed over while the previous run went on: not a run"},
	{kindPaused, "a scheduled time passed over while the job was paused: not a run"},
	{kindOther, "an outcome this version does not know"},
}

// states are the lease states, in the words of leasewrap status (see
// docs/operations.md), strongest first: a job with several slots shows
// the strongest of its rows'. The first three are live.
var states = []word{
	{string(lease.StateHeld), "a holder runs the command and renews the lease"},
	{string(lease.StateReleasing), "an operator asked the holder to hand the lease back; it stops at once, or at its next renewal if it cannot listen"},
	{string(lease.StateKept), "the command finished and --hold-for keeps the lease until it expires: no other instance runs the job before then"},
	{string(lease.StateExpired), "its holder stopped renewing without releasing (crashed, or cut off): free to take"},
	{string(lease.StateReleased), "handed back: free to take"},
}

// healths are what each of a job's states (inspect.States, the judgement
// check, status and the exporter share) means, as the legend says it;
// each has its own colour (class h-NAME).
// TestEveryHealthHasAMeaningAndAColour keeps the list whole.
var healths = map[string]string{
	inspect.StateHealthy: "nothing to act on",
	inspect.StatePaused:  "an operator paused the job (leasewrap pause): nothing runs it until it is resumed, on purpose; not an alarm",
	inspect.StateFailing: "the run judged (of the latest scheduled time, or the newest run) did not succeed",
	inspect.StateMissed:  "the latest scheduled time was recorded missed: no instance could run it in time",
	inspect.StateOverdue: "the latest scheduled time was neither run nor recorded missed: are its schedulers running?",
	inspect.StateStale:   "a job without a schedule has no success recent enough",
	inspect.StateAbsent:  "no lease row and no run of the job",
	inspect.StateUnknown: "its state cannot be told (its history or its schedule cannot be read)",
}

// kindOf says how a run is shown.
func kindOf(r inspect.Run) string {
	switch r.Outcome {
	case lease.OutcomeExited:
		if r.Succeeded() {
			return kindSucceeded
		}
		return kindFailed
	case lease.OutcomeSignalled:
		return kindSignalled
	case lease.OutcomeLost:
		return kindLost
	case lease.OutcomeTimedOut:
		return kindTimedOut
	case lease.OutcomeStopped:
		return kindStopped
	case lease.OutcomeCouldNotStart:
		return kindCouldNotStart
	case lease.OutcomeMissed:
		return kindMissed
	case lease.OutcomeSkipped:
		return kindSkipped
	case lease.OutcomePaused:
		return kindPaused
	case inspect.OutcomeRunning:
		return kindRunning
	}
	return kindOther
}

// kindMeaning is what a kind of run means, as the legend says it.
func kindMeaning(kind string) string {
	for _, k := range kinds {
		if k.name == kind {
			return k.meaning
		}
	}
	return ""
}

// notRun reports whether r is a scheduled time that nobody ran (missed,
// skipped or paused): no run, so a mark on the axis rather than a box in a
// lane, and counted apart from the runs.
func notRun(r inspect.Run) bool { return lease.NotRun(r.Outcome) }

// legend writes what the pages' words mean: the jobs' health, the lease
// states and the kinds of run.
func legend(b *html) {
	b.raw(`<section class="legend" id="legend"><h2>Legend</h2><h3>Health</h3>` +
		`<p class="none">The same judgement as leasewrap check, status and the exporter; each job's reason is written with it.</p><dl>`)
	for _, h := range inspect.States {
		// No data-health here: that names a job's state.
		b.raw(`<dt><span class="health h-`)
		b.raw(h)
		b.raw(`">`)
		b.raw(h)
		b.raw(`</span></dt><dd>`)
		b.text(healths[h])
		b.raw(`</dd>`)
	}
	b.raw(`</dl><h3>Lease state</h3><dl>`)
	for _, s := range states {
		b.raw(`<dt><span class="state s-`)
		b.raw(s.name)
		b.raw(`">`)
		b.raw(s.name)
		b.raw(`</span></dt><dd>`)
		b.text(s.meaning)
		b.raw(`</dd>`)
	}
	b.raw(`</dl><h3>Outcome</h3><dl>`)
	for _, k := range kinds {
		b.raw(`<dt><span class="outcome k-`)
		b.raw(k.name)
		b.raw(`">`)
		b.raw(k.name)
		b.raw(`</span></dt><dd>`)
		b.text(k.meaning)
		b.raw(`</dd>`)
	}
	b.raw(`</dl></section>`)
}
