package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// connectErr is what a first statement through lease.Connect's pool
// returns for dsn.
func connectErr(t *testing.T, dsn string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pool, err := lease.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pool.Ping(ctx)
}

// server listens on loopback and hands each connection to serve.
func server(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// Errors of real connection attempts: the ones that waiting may mend are
// Unreachable, the ones it will not are not.
func TestUnreachableOfRealConnections(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		err := connectErr(t, "postgres://u:pw@"+pgtest.RefusedAddr(t)+"/db?sslmode=disable&connect_timeout=5")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dialling a closed port: %v, want connection refused", err)
		}
		if !lease.Unreachable(err) {
			t.Errorf("Unreachable(%v) = false, want true", err)
		}
	})
	t.Run("closed at start-up", func(t *testing.T) {
		t.Parallel()
		addr := server(t, func(c net.Conn) { c.Close() })
		err := connectErr(t, "postgres://u:pw@"+addr+"/db?sslmode=disable&connect_timeout=5")
		var connect *pgconn.ConnectError
		if !errors.As(err, &connect) {
			t.Fatalf("a server that hangs up: %v, want a connect error", err)
		}
		if !lease.Unreachable(err) {
			t.Errorf("Unreachable(%v) = false, want true", err)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		addr := server(t, func(c net.Conn) {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1<<16))
			<-t.Context().Done()
		})
		err := connectErr(t, "postgres://u:pw@"+addr+"/db?sslmode=disable&connect_timeout=1")
		if !pgconn.Timeout(err) {
			t.Fatalf("a server that never answers: %v, want a timeout", err)
		}
		if !lease.Unreachable(err) {
			t.Errorf("Unreachable(%v) = false, want true", err)
		}
	})
	t.Run("no such database", func(t *testing.T) {
		t.Parallel()
		pgtest.Pool(t) // fails or skips when there is no test database
		u, err := url.Parse(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/lw_no_such_database"
		err = connectErr(t, u.String())
		if code := pgerr.SQLState(err); code != pgerr.CodeInvalidCatalogName {
			t.Fatalf("a database that does not exist: %v, want SQLSTATE %s", err, pgerr.CodeInvalidCatalogName)
		}
		if lease.Unreachable(err) {
			t.Errorf("Unreachable(%v) = true, want false", err)
		}
	})
	t.Run("bad URL", func(t *testing.T) {
		t.Parallel()
		err := connectErr(t, "mysql://u:pw@127.0.0.1/db")
		if !errors.Is(err, lease.ErrBadDatabaseURL) {
			t.Fatalf("a mysql URL: %v, want ErrBadDatabaseURL", err)
		}
		if lease.Unreachable(err) {
			t.Errorf("Unreachable(%v) = true, want false", err)
		}
	})
}

// The server's refusals by SQLSTATE, and errors wrapped and joined as the
// pool and the lease store return them.
func TestUnreachableBySQLState(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused"}}
	server := func(code string) error {
		return fmt.Errorf("cannot look up lease table %q: %w", "leader_lease", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial error", fmt.Errorf("failed to connect: %w", refused), true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"deadline", fmt.Errorf("failed to connect: %w", context.DeadlineExceeded), true},
		{"cancelled", fmt.Errorf("failed to connect: %w", context.Canceled), false},
		{"starting up", server(pgerr.CodeCannotConnectNow), true},
		{"admin shutdown", server(pgerr.CodeAdminShutdown), true},
		{"crash shutdown", server(pgerr.CodeCrashShutdown), true},
		{"too many connections", server(pgerr.CodeTooManyConnections), true},
		{"wrong password", server(pgerr.CodeInvalidPassword), false},
		{"no pg_hba entry", server(pgerr.CodeInvalidAuthorization), false},
		{"no such database", server(pgerr.CodeInvalidCatalogName), false},
		{"no privilege", server(pgerr.CodeNoPrivilege), false},
		{"read-only", server(pgerr.CodeReadOnly), false},
		{"bad URL", fmt.Errorf("%w: unknown scheme", lease.ErrBadDatabaseURL), false},
		{"plain error", errors.New("something else"), false},
		{"two hosts down", errors.Join(refused, server(pgerr.CodeCannotConnectNow)), true},
		{"one host down, one without the database", errors.Join(refused, server(pgerr.CodeInvalidCatalogName)), false},
	} {
		if got := lease.Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
