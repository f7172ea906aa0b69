package lease

import "time"

// Observer is told what a Store's leases go through. Its methods are called
// from the renewing goroutine, the caller's and a scheduler's listener,
// possibly at once, and must not block.
type Observer interface {
	// Contacted is called whenever the database answered a statement.
	Contacted()
	// Reached is called when the database answered a keepalive on a
	// listening connection: it can be reached. Whether its statements
	// succeed is for Contacted and Failed to say.
	Reached()
	// Failed is called when a statement failed for a reason other than a
	// lease held by another instance: the database is down, read-only, or
	// refuses the table.
	Failed(err error)
	// Renewed is called after each renewal attempt with how long it took and
	// its error: nil, one wrapping ErrLost, or another failure.
	Renewed(took time.Duration, err error)
	// Lost is called when a lease ends because leadership can no longer be
	// guaranteed (Done closes with an error wrapping ErrLost).
	Lost(err error)
}

type nopObserver struct{}

func (nopObserver) Contacted()                   {}
func (nopObserver) Reached()                     {}
func (nopObserver) Failed(error)                 {}
func (nopObserver) Renewed(time.Duration, error) {}
func (nopObserver) Lost(error)                   {}
