package lease

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/session"
)

// DefaultConnectTimeout bounds each connection attempt when the connection
// string sets no connect_timeout: a wrapper in front of a cron job must give
// up on an unreachable database in bounded time.
const DefaultConnectTimeout = 10 * time.Second

// ApplicationName is the application_name of Connect's sessions, unless
// the connection string sets one.
const ApplicationName = "leasewrap"

// Connect returns a small pool, for a command that sends a few statements
// and exits: one connection reads while another may write, and a broken
// connection is replaced on the next statement. An empty dsn means libpq's
// defaults and PG* variables. It does not connect yet. A wrapper, which
// lives long, holds one connection instead (ConnectSession).
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ConnectSession returns the one connection a wrapper holds, configured
// as Connect's are: its statements, a standby's looks, a leader's
// renewals and every LISTEN share it, so that each wrapper costs the
// server one backend (see session.Conn). A broken connection is replaced
// on the next statement. It does not connect yet.
func ConnectSession(dsn string) (*session.Conn, error) {
	cfg, err := poolConfig(dsn)
	if err != nil {
		return nil, err
	}
	return session.New(session.Config{ConnConfig: cfg.ConnConfig, AfterConnect: cfg.AfterConnect}), nil
}

// dateStyleSQL sets the session's DateStyle to the one pgx reads.
const dateStyleSQL = `SET DateStyle = ISO`

// poolConfig is the configuration of leasewrap's connections for dsn.
func poolConfig(dsn string) (*pgxpool.Config, error) {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && scheme != "postgres" && scheme != "postgresql" && !strings.ContainsAny(scheme, " =") {
		return nil, fmt.Errorf("%w: unknown scheme %q, want postgres://", ErrBadDatabaseURL, scheme)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s; expected postgres://user@host:port/db or key=value pairs such as \"host=db dbname=app\"",
			ErrBadDatabaseURL, parseProblem(err))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// A DBA tells leasewrap's sessions apart in pg_stat_activity by this,
	// unless the URL (or PGAPPNAME) names them otherwise.
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = ApplicationName
	}
	// Times come back as text in the exec mode below, which pgx reads in
	// the ISO style only: a database, role or URL whose DateStyle is, say,
	// "SQL, DMY" must not make every read of a time fail. The style is set
	// only where the server reports another: a start-up parameter would
	// make PgBouncer, which compares it with the server's own words ("ISO,
	// MDY"), send a SET ahead of every transaction.
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if strings.HasPrefix(conn.PgConn().ParameterStatus("DateStyle"), "ISO") {
			return nil
		}
		_, err := conn.Exec(ctx, dateStyleSQL)
		return err
	}
	// Named prepared statements are session state that a pooler in
	// transaction mode (PgBouncer) cannot keep; every statement here casts
	// its parameters, so the one-round-trip exec mode loses nothing.
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	// pgxpool pings a connection that was idle for over a second before
	// handing it out: an empty statement, but one that PostgreSQL counts as
	// a transaction, so a leader's renewals would cost two each. A renewal
	// that finds its connection broken is retried at once instead, on a
	// fresh one (Lease.renew); other statements retry as they did. A
	// session never pings.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	return cfg, nil
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

// parseProblem is what pgx found wrong with a connection string, without the
// string itself (pgx masks the password in it, but only as best it can).
func parseProblem(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "`: "); ok {
		return after
	}
	return msg
}
