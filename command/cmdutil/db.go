package cmdutil

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/internal/session"
	"github.com/redbite/leasewrap/lease"
)

// Database is an open database, a pool or a session, and what is needed
// to talk about it safely.
type Database struct {
	// Pool is a subcommand's (OpenDatabase), nil for a wrapper's.
	Pool *pgxpool.Pool
	// Session is a wrapper's one connection (OpenSession), nil for a
	// subcommand's.
	Session *session.Conn
	Redact  *redact.Redactor
	cfg     *pgx.ConnConfig
}

// OpenDatabase opens the pool for a connection string, for a subcommand,
// and says at debug level which database it is. A string it cannot parse
// is refused with a usage error that says which part is wrong and never
// repeats the password; so is the lack of one where nothing else names a
// database (namedDatabase). Every subcommand that uses a database opens it
// here.
func OpenDatabase(ctx context.Context, dsn string, secrets *redact.Redactor, log zerolog.Logger) (*Database, error) {
	if err := namedDatabase(dsn); err != nil {
		return nil, err
	}
	pool, err := lease.Connect(ctx, dsn)
	if err != nil {
		return nil, Usagef("invalid --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL): %w", secrets.Wrap(err))
	}
	return opened(&Database{Pool: pool, Redact: secrets, cfg: pool.Config().ConnConfig}, log), nil
}

// OpenSession is OpenDatabase for a wrapper: one connection, which its
// statements and its LISTENs share (lease.ConnectSession), so that a
// leader, a standby or a scheduler holds one backend.
func OpenSession(dsn string, secrets *redact.Redactor, log zerolog.Logger) (*Database, error) {
	if err := namedDatabase(dsn); err != nil {
		return nil, err
	}
	conn, err := lease.ConnectSession(dsn)
	if err != nil {
		return nil, Usagef("invalid --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL): %w", secrets.Wrap(err))
	}
	return opened(&Database{Session: conn, Redact: secrets, cfg: conn.Config().ConnConfig}, log), nil
}

// opened registers d's password with its redactor and says which
// database d is.
func opened(d *Database, log zerolog.Logger) *Database {
	d.Redact.Add(d.cfg.Password)
	d.Named(log.Debug()).Str("user", d.cfg.User).Msg("lease database")
	return d
}

// namingVariables are the environment variables that name a database
// without a connection string. pgx reads the PG* variables itself, and of
// those these alone say where: PGPORT, PGUSER, PGPASSWORD and the rest
// only adjust the default, and PGHOSTADDR and PGSERVICEFILE (without
// PGSERVICE) are not read or not used at all.
var namingVariables = []string{"PGHOST", "PGDATABASE", "PGSERVICE"}

// namedDatabase refuses to go on when neither dsn nor a naming variable
// says which database to use. libpq's defaults would pick the local socket
// (or localhost) and a database named after the user: on hosts that each
// run a PostgreSQL, a crontab that lost its environment line would have
// each host take its own lease, and every host run the job. Any non-empty
// connection string counts, even "postgres://": writing it is the choice.
func namedDatabase(dsn string) error {
	if strings.TrimSpace(dsn) != "" {
		return nil
	}
	for _, name := range namingVariables {
		if os.Getenv(name) != "" {
			return nil
		}
	}
	return Usagef("no database named: give --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL), or set PGHOST, PGDATABASE or PGSERVICE")
}

// Where names the database without the password: its hosts and ports
// (lease.Hosts) and its name. An empty --database-url leaves both to
// libpq's defaults, and an empty name to the server's, the user's name.
func (d *Database) Where() (hosts, name string) {
	cfg := d.cfg
	name = cfg.Database
	if name == "" {
		name = cfg.User
	}
	return lease.Hosts(&cfg.Config), name
}

// Named adds the database's hosts and name to a log line.
func (d *Database) Named(ev *zerolog.Event) *zerolog.Event {
	hosts, name := d.Where()
	return ev.Str("database", hosts).Str("database_name", name)
}

// StoreLogger is log with the database's hosts and name, for the Store:
// the lines it logs when it creates or upgrades a table say where.
func (d *Database) StoreLogger(log zerolog.Logger) zerolog.Logger {
	hosts, name := d.Where()
	return log.With().Str("database", hosts).Str("database_name", name).Logger()
}

// Close closes the pool or session but waits at most a second: closing a
// connection to a server that stopped answering can take far longer, and
// leasewrap's exit must not wait for it.
func (d *Database) Close() {
	closed := make(chan struct{})
	go func() {
		if d.Session != nil {
			d.Session.Close()
		} else {
			d.Pool.Close()
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
}

// OneLine is err's message on one line. A *pgconn.ConnectError with
// several attempts (one per host, and per TLS mode tried) puts each on a
// line of its own, under a first line that ends in a colon: each different
// one is said once, after "; ". The message is read as written rather than
// from the error's tree, which would miss what a redactor masked.
func OneLine(err error) string {
	head, rest, _ := strings.Cut(err.Error(), "\n\t")
	var attempts []string
	for _, a := range strings.Split(rest, "\n\t") {
		if a != "" && !slices.Contains(attempts, a) {
			attempts = append(attempts, a)
		}
	}
	if len(attempts) == 0 {
		return strings.ReplaceAll(head, "\n", "; ")
	}
	sep := "; "
	if strings.HasSuffix(head, ":") {
		sep = " "
	}
	return strings.ReplaceAll(head+sep+strings.Join(attempts, "; "), "\n", "; ")
}

// Unavailable logs why the lease store could not be used, naming the
// database, and returns EX_UNAVAILABLE.
func (d *Database) Unavailable(err error, log zerolog.Logger) error {
	ev := d.Named(log.Error()).Str("error", OneLine(err))
	if errors.Is(err, lease.ErrNotLeaseTable) {
		ev.Msg("refusing a table that is not a lease table: check --table (or LEASEWRAP_TABLE)")
	} else if errors.Is(err, lease.ErrNotReplicated) {
		ev.Msg("not starting the command: --require-replicated, and no standby confirmed the lease")
	} else {
		ev.Msg("lease store unavailable")
	}
	return ExitWith(ExitUnavailable)
}
