package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// A new connection that the server never answers, ended by its
// connect_timeout a moment before the statement's own deadline, is said
// the same way, with the shorter of the two bounds.
func TestNoAnswerWhileConnecting(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn // accepted, never answered
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	cfg, err := pgconn.ParseConfig("postgres://u@" + silent.Addr().String() + "/d?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, connErr := pgconn.ConnectConfig(ctx, cfg)
	var no *NoAnswerError
	if got := noAnswer(ctx, connErr, 5*time.Second); !errors.As(got, &no) || no.Within != time.Second {
		t.Errorf("noAnswer(%v) = %v, want the database named as not answering within the connect_timeout, 1s", connErr, got)
	}
	if got := noAnswer(ctx, errors.New("refused"), 5*time.Second); errors.As(got, &no) {
		t.Errorf("noAnswer of an error that is no timeout = %v, want it as it was", got)
	}
}
