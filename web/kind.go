package web

import (
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
)

// Kinds of run, as the pages colour them. Each is a CSS class (k-NAME) and
// the value of a run box's data-outcome attribute.
const (
	kindSucceeded     = "succeeded"       // exited 0
	kindFailed        = "failed"          // exited non-zero
	kindSignalled     = "signalled"       // ended by a signal
	kindLost          = "lost"            // the lease was lost, or the holder never came back
	kindTimedOut      = "timed_out"       // ran past --max-runtime
	kindStopped       = "stopped"         // an operator released the lease
	kindCouldNotStart = "could_not_start" // the command could not be executed
	kindRunning       = "running"         // holds the lease now
	kindMissed        = "missed"          // a scheduled time nobody ran
	kindSkipped       = "skipped"         // a scheduled time passed over on purpose
	kindOther         = "other"           // an outcome this version does not know
)

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
	case lease.OutcomeSkipped, lease.OutcomePaused:
		return kindSkipped
	case inspect.OutcomeRunning:
		return kindRunning
	}
	return kindOther
}

// isMark reports whether a run is a scheduled time that did not run
// (missed or skipped): a mark on the axis rather than a box in a lane.
func isMark(kind string) bool { return kind == kindMissed || kind == kindSkipped }

// barKinds orders the outcomes of /'s bar of recent runs, good to bad.
var barKinds = []string{kindSucceeded, kindRunning, kindSkipped, kindStopped, kindFailed, kindSignalled, kindTimedOut,
	kindCouldNotStart, kindLost, kindMissed, kindOther}
