package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultConnectTimeout bounds each connection attempt when the connection
// string sets no connect_timeout: a wrapper in front of a cron job must give
// up on an unreachable database in bounded time.
const DefaultConnectTimeout = 10 * time.Second

// ErrBadDatabaseURL is returned (wrapped) for a connection string that cannot
// be parsed. The message never repeats the string, which may hold a password.
var ErrBadDatabaseURL = errors.New("invalid database URL")

// Connect returns a small pool for a wrapper: one connection renews while
// another may release or read, and a broken connection is replaced on the
// next statement. An empty dsn means libpq's defaults and PG* variables. It
// does not connect yet.
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: expected postgres://user@host:port/db or key=value pairs such as \"host=db dbname=app\"", ErrBadDatabaseURL)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// Named prepared statements are session state that a pooler in
	// transaction mode (PgBouncer) cannot keep; every statement here casts
	// its parameters, so the one-round-trip exec mode loses nothing.
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	cfg.MaxConns = 2
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Hosts lists the servers a pool's connection string names, as host:port,
// for messages: never with user or password.
func Hosts(cfg *pgconn.Config) string {
	hosts := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, fb := range cfg.Fallbacks {
		h := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))
		if h != hosts[len(hosts)-1] {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",")
}

// Redact replaces every occurrence of the connection's password in msg.
// pgx does not print passwords, but errors from below it (URL parsing,
// resolvers) could echo what they were given.
func Redact(msg string, cfg *pgconn.Config) string {
	if cfg == nil || cfg.Password == "" {
		return msg
	}
	return strings.ReplaceAll(msg, cfg.Password, "xxxxx")
}

// ErrReadOnly is returned (wrapped) when the server refuses writes: a hot
// standby, or a session that is read-only by default.
var ErrReadOnly = errors.New("the database is read-only (a standby, or default_transaction_read_only is on): point the connection string at the primary, for example with target_session_attrs=read-write")

// classify turns the server's read-only refusal (SQLSTATE 25006), and pgx's
// when target_session_attrs=read-write found no primary, into ErrReadOnly, so
// that neither is reported as a raw SQL error.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "25006" || errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return ErrReadOnly
	}
	return err
}
