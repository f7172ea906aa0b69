package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// A statement the database did not answer says so with its bound, and
// still is the timeout it wraps.
func TestNoAnswerError(t *testing.T) {
	err := fmt.Errorf("cannot renew lease %q: %w", "dbhang", &NoAnswerError{Within: 999_700 * time.Microsecond, Err: context.DeadlineExceeded})
	if want := `cannot renew lease "dbhang": the database did not answer within 1s`; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v is not context.DeadlineExceeded", err)
	}
}
