package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
)

// A stall of this process can end a take in its context's deadline or in
// a socket deadline that passed meanwhile ("dial tcp …: i/o timeout", seen
// when a wrapper was frozen while connecting): both are tried once more;
// an answer or a refusal is not.
func TestTimedOutCoversSocketDeadlines(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("cannot acquire lease %q: %w", "j", context.DeadlineExceeded), true},
		{fmt.Errorf("failed to connect: dial error: timeout: %w", dial), true},
		{fmt.Errorf("failed to connect: %w", errors.New("connection refused")), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := timedOut(tc.err); got != tc.want {
			t.Errorf("timedOut(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
