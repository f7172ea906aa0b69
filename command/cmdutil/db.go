package cmdutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/lease"
)

// Database is an open pool and what is needed to talk about it safely.
type Database struct {
	Pool   *pgxpool.Pool
	Redact *Redactor
}

// OpenDatabase opens the pool for a connection string, and says at debug
// level which database it is. A string it cannot parse is refused with a
// usage error that says which part is wrong and never repeats the password;
// so is the lack of one where nothing else names a database (namedDatabase).
// Every command that uses a database opens it here.
func OpenDatabase(ctx context.Context, dsn string, redact *Redactor, log zerolog.Logger) (*Database, error) {
	if err := namedDatabase(dsn); err != nil {
		return nil, err
	}
	pool, err := lease.Connect(ctx, dsn)
	if err != nil {
		return nil, Usagef("invalid --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL): %w", redact.Wrap(err))
	}
	redact.Add(pool.Config().ConnConfig.Password)
	d := &Database{Pool: pool, Redact: redact}
	d.Named(log.Debug()).Str("user", pool.Config().ConnConfig.User).Msg("lease database")
	return d, nil
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
	cfg := d.Pool.Config().ConnConfig
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

// Close closes the pool but waits at most a second: closing a connection to
// a server that stopped answering can take far longer, and leasewrap's exit
// must not wait for it.
func (d *Database) Close() {
	closed := make(chan struct{})
	go func() {
		d.Pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
}

// Unavailable logs why the lease store could not be used, naming the
// database, and returns EX_UNAVAILABLE.
func (d *Database) Unavailable(err error, log zerolog.Logger) error {
	msg := strings.ReplaceAll(err.Error(), "\n\t", "; ")
	ev := d.Named(log.Error()).Str("error", msg)
	if errors.Is(err, lease.ErrNotLeaseTable) {
		ev.Msg("refusing a table that is not a lease table: check --table (or LEASEWRAP_TABLE)")
	} else if errors.Is(err, lease.ErrNotReplicated) {
		ev.Msg("not starting the command: --require-replicated, and no standby confirmed the lease")
	} else {
		ev.Msg("lease store unavailable")
	}
	return ExitWith(ExitUnavailable)
}

// Redactor removes the connection's password from text. Every log line and
// error message leaves leasewrap through it: pgx does not print passwords,
// but a server message or a resolver may echo what it was given.
type Redactor struct {
	secrets []string
	mask    string // what a secret becomes; it shares no character with any
}

// masks are the candidates for redactor.mask, in order of preference.
var masks = []string{"xxxxx", "*****", "#####", "_____", "....."}

// NewRedactor knows the password of dsn as written, before anything has
// parsed it (a string pgx cannot parse may still be echoed); openDatabase
// adds the one pgx parsed, percent-decoded.
func NewRedactor(dsn string) *Redactor {
	r := &Redactor{mask: masks[0]}
	if _, rest, ok := strings.Cut(dsn, ":"); ok {
		if userinfo, _, ok := strings.Cut(strings.TrimPrefix(rest, "//"), "@"); ok {
			if _, raw, ok := strings.Cut(userinfo, ":"); ok {
				r.Add(raw)
			}
		}
	}
	for _, field := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(field, "password="); ok {
			r.Add(strings.Trim(v, "'"))
		}
	}
	return r
}

// Add learns a secret, and picks a mask none of the secrets has a character
// of: a mask could otherwise complete a secret with the text beside it
// (password "ax" in "aax"), or be one (password "xxxxx"). When every mask
// collides, secrets are removed instead.
func (r *Redactor) Add(secret string) {
	if secret == "" {
		return
	}
	r.secrets = append(r.secrets, secret)
	r.mask = ""
	for _, m := range masks {
		if !slices.ContainsFunc(r.secrets, func(s string) bool { return strings.ContainsAny(s, m[:1]) }) {
			r.mask = m
			return
		}
	}
}

// String returns s with every secret replaced. A removal can join two parts
// into a secret again, hence the loop; each round makes s shorter.
func (r *Redactor) String(s string) string {
	for again := true; again; {
		again = false
		for _, secret := range r.secrets {
			if strings.Contains(s, secret) {
				s = strings.ReplaceAll(s, secret, r.mask)
				again = r.mask == ""
			}
		}
	}
	return s
}

// Wrap returns err with its message redacted, for output that does not go
// through the logger. errors.Is and errors.As still see the whole chain.
func (r *Redactor) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, r: r}
}

// redactedError is an error whose message is redacted; Unwrap returns the
// original, whose own message is not.
type redactedError struct {
	err error
	r   *Redactor
}

func (e *redactedError) Error() string { return e.r.String(e.err.Error()) }

func (e *redactedError) Unwrap() error { return e.err }

// Writer returns w, which takes zerolog's JSON lines, with the secrets
// masked in every line's string values (see JSON) and hidden characters
// escaped. zerolog writes one whole line per call.
func (r *Redactor) Writer(w io.Writer) io.Writer { return redactWriter{r, w} }

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (rw redactWriter) Write(p []byte) (int, error) {
	line, ok := rw.r.JSON(p)
	if !ok { // not zerolog's: mask it as text
		line = []byte(rw.r.String(string(p)))
	}
	// Names read from the table may hold characters a terminal acts on;
	// zerolog escapes only those below U+0020.
	line = escape.SafeJSON(line)
	if _, err := rw.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON returns line, one JSON value, with the secrets masked in its string
// values. Names, numbers and the order of fields are kept: replacing a
// password as a substring of the line would break the syntax ("1" in a
// number, "level" in a name, a quote). ok is false if line is not JSON.
func (r *Redactor) JSON(line []byte) (_ []byte, ok bool) {
	if len(r.secrets) == 0 {
		return line, true
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	out := bytes.NewBuffer(make([]byte, 0, len(line)+16))
	type container struct {
		object bool
		n      int // tokens so far: in an object, even ones are names
	}
	var open []container
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			open = open[:len(open)-1]
			out.WriteByte(byte(d))
			continue
		}
		name := false
		if len(open) > 0 {
			c := &open[len(open)-1]
			switch {
			case c.object && c.n%2 == 1:
				out.WriteByte(':')
			case c.n > 0:
				out.WriteByte(',')
			}
			name = c.object && c.n%2 == 0
			c.n++
		}
		switch v := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(v))
			open = append(open, container{object: v == '{'})
		case string:
			if !name {
				v = r.String(v)
			}
			writeJSONString(out, v)
		case json.Number:
			out.WriteString(v.String())
		case bool:
			out.WriteString(strconv.FormatBool(v))
		case nil:
			out.WriteString("null")
		}
	}
	if len(open) > 0 || out.Len() == 0 {
		return nil, false
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes(), true
}

// writeJSONString writes s quoted, leaving <, > and & as they are (as
// zerolog does).
func writeJSONString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
}
