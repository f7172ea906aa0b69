// Package pgtest gives tests a real PostgreSQL database and a fresh lease
// table per test. Under CI=true a database that cannot be reached fails the
// test; elsewhere it skips it with the reason.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/stall"
	"github.com/redbite/leasewrap/internal/tcpproxy"
)

// DefaultURL is the database tests use unless LEASEWRAP_TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test database's connection string.
func URL() string {
	if u := os.Getenv("LEASEWRAP_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Pool connects to the test database, or fails (CI) or skips the test.
// The pool is closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, URL())
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		Missing(t, "test database %s unreachable (set LEASEWRAP_TEST_DATABASE_URL): %v", URL(), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var seq atomic.Int64

// Table returns a table name no other test uses, and drops the table and
// its run history and claims when the test ends. It is short enough for
// the history and claims tables to be named "<table>_history" and
// "<table>_schedule".
func Table(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("lw_%s_%d_%d", sanitize(t.Name()), os.Getpid(), seq.Add(1))
	if len(name) > 63-len("_schedule") {
		name = name[len(name)-(63-len("_schedule")):]
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()+", "+
			pgx.Identifier{name + "_history"}.Sanitize()+", "+pgx.Identifier{name + "_schedule"}.Sanitize()); err != nil {
			t.Errorf("drop test table %s: %v", name, err)
		}
	})
	return name
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, s)
}

// Missing fails the test under CI=true, where every tool the tests need is
// installed and a skip would hide a broken setup, and skips it elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: tests must not skip)", args...)
	}
	t.Skipf(format, args...)
}

// Proxied starts a TCP proxy in front of pool's server, for injecting
// network faults, and returns it with a connection string through it that
// gives up connecting after a second.
func Proxied(t testing.TB, pool *pgxpool.Pool) (*tcpproxy.Proxy, string) {
	t.Helper()
	cfg := pool.Config().ConnConfig
	proxy := tcpproxy.Start(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	return proxy, fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=1", cfg.User, proxy.Addr(), cfg.Database)
}

// Eventually polls cond every 20ms until it holds, failing the test with
// what when within passes first. within stretches by the stalls this
// process saw meanwhile (stall.Within): a loaded machine is not a failure.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	stall.Watch()
	start := time.Now()
	for !cond() {
		if !stall.Within(start, within) {
			t.Fatalf("%s: not within %s (+%s stalled)", what, within, stall.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RefusedAddr is a loopback address that refuses connections: a port that
// was just listened on and closed.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
