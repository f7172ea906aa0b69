package schema

import (
	"slices"
	"time"
)

// LeaseState is how a lease row stands, in the words the CLI, the web page and
// HeldError show. HeldState and RowState decide it in SQL, StateOf in Go
// from the same row's times; TestLookAgreesWithTheSQLState keeps them
// alike.
type LeaseState string

// Lease states. The first three are live: no other holder can take the
// lease.
const (
	// StateHeld: a holder has the lease and renews it.
	StateHeld LeaseState = "held"
	// StateReleasing: an operator asked the holder to hand the lease back;
	// it stops its command at once, or at its next renewal if it cannot
	// listen.
	StateReleasing LeaseState = "releasing"
	// StateKept: the holder's command finished, and --hold-for keeps the
	// lease until it expires.
	StateKept LeaseState = "kept"
	// StateReleased: handed back, free to take.
	StateReleased LeaseState = "released"
	// StateExpired: not renewed in time, free to take.
	StateExpired LeaseState = "expired"
	// StatePaused: an operator paused the job: no instance takes its lease
	// until it is resumed or the pause runs out. A command already running
	// goes on.
	StatePaused LeaseState = "paused"
)

// strength orders the states a job with several rows (slots) can show,
// strongest first: the live ones (no other holder can take the lease),
// then expired before released (a holder that went away is the news).
var strength = []LeaseState{StateHeld, StateReleasing, StateKept, StateExpired, StateReleased}

func (s LeaseState) rank() int {
	if i := slices.Index(strength, s); i >= 0 {
		return i
	}
	return len(strength)
}

// StrongerState is the state a job whose rows (slots) are in states a and
// b shows: a job is held while any of its slots is, held before releasing
// before kept before expired before released. Any other state ("" for no
// row) is weaker than those; between two of them it is a.
func StrongerState(a, b LeaseState) LeaseState {
	if b.rank() < a.rank() {
		return b
	}
	return a
}

// StateOf is HeldState worked out in Go from a live row's times, for a
// look that reads the row bare.
func StateOf(expires time.Time, released, finished *time.Time) LeaseState {
	switch {
	case released == nil:
		return StateHeld
	case !expires.After(*released):
		return StateReleased
	case finished != nil:
		return StateKept
	default:
		return StateReleasing
	}
}
