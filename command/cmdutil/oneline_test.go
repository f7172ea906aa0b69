package cmdutil

import (
	"errors"
	"fmt"
	"testing"
)

// pgx's attempts, one per line under a line ending in a colon, come out
// once each on one line; other messages keep their words.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("connection refused"), "connection refused"},
		{fmt.Errorf("cannot take lease %q: %w", "j", errors.New("failed to connect to `user=u database=d`:\n\ta:1 (a): refused\n\ta:1 (a): refused\n\tb:2 (b): reset\n\tb:2 (b): reset")),
			"cannot take lease \"j\": failed to connect to `user=u database=d`: a:1 (a): refused; b:2 (b): reset"},
		{errors.New("first\n\tsecond"), "first; second"},
		{errors.New("one\ntwo"), "one; two"},
	} {
		if got := OneLine(tc.err); got != tc.want {
			t.Errorf("OneLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
