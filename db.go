package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/lease"
)

// database is an open pool and what is needed to talk about it safely.
type database struct {
	pool   *pgxpool.Pool
	redact *redactor
}

// openDatabase opens the pool for a connection string. A string it cannot
// parse is refused with a usage error that says which part is wrong and
// never repeats the password.
func openDatabase(ctx context.Context, dsn string, redact *redactor) (*database, error) {
	pool, err := lease.Connect(ctx, dsn)
	if err != nil {
		return nil, usagef("invalid --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL): %s", redact.String(err.Error()))
	}
	redact.add(pool.Config().ConnConfig.Password)
	return &database{pool: pool, redact: redact}, nil
}

// close closes the pool but waits at most a second: closing a connection to
// a server that stopped answering can take far longer, and leasewrap's exit
// must not wait for it.
func (d *database) close() {
	closed := make(chan struct{})
	go func() {
		d.pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
}

// unavailable logs why the lease store could not be used, naming the
// database hosts, and returns EX_UNAVAILABLE.
func (d *database) unavailable(err error, log zerolog.Logger) error {
	cfg := d.pool.Config().ConnConfig
	msg := strings.ReplaceAll(err.Error(), "\n\t", "; ")
	ev := log.Error().Str("database", lease.Hosts(&cfg.Config)).Str("error", msg)
	if errors.Is(err, lease.ErrNotLeaseTable) {
		ev.Msg("refusing a table that is not a lease table: check --table (or LEASEWRAP_TABLE)")
	} else if errors.Is(err, lease.ErrNotReplicated) {
		ev.Msg("not starting the command: --require-replicated, and no standby confirmed the lease")
	} else {
		ev.Msg("lease store unavailable")
	}
	return exitWith(exitUnavailable)
}

// redactor removes the connection's password from text. Every log line and
// error message leaves leasewrap through it: pgx does not print passwords,
// but a server message or a resolver may echo what it was given.
type redactor struct {
	secrets []string
}

// newRedactor knows the password of dsn as written, before anything has
// parsed it (a string pgx cannot parse may still be echoed); openDatabase
// adds the one pgx parsed, percent-decoded.
func newRedactor(dsn string) *redactor {
	r := &redactor{}
	if _, rest, ok := strings.Cut(dsn, ":"); ok {
		if userinfo, _, ok := strings.Cut(strings.TrimPrefix(rest, "//"), "@"); ok {
			if _, raw, ok := strings.Cut(userinfo, ":"); ok {
				r.add(raw)
			}
		}
	}
	for _, field := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(field, "password="); ok {
			r.add(strings.Trim(v, "'"))
		}
	}
	return r
}

func (r *redactor) add(secret string) {
	if secret != "" {
		r.secrets = append(r.secrets, secret)
	}
}

// String returns s with every secret replaced.
func (r *redactor) String(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "xxxxx")
	}
	return s
}

// errorf returns err with its message redacted, for output that does not
// go through the logger.
func (r *redactor) errorf(err error) error { return errors.New(r.String(err.Error())) }

// writer returns w with every write redacted. zerolog writes one whole line
// per call, so a secret is never split across writes.
func (r *redactor) writer(w io.Writer) io.Writer { return redactWriter{r, w} }

type redactWriter struct {
	r *redactor
	w io.Writer
}

func (rw redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
