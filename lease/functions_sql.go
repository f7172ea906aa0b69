package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redbite/leasewrap/internal/pgerr"
	"github.com/redbite/leasewrap/schema"
)

// The statements a fleet sends most, a standby's look in its queue, a
// leader's renewal and a polling standby's refresh of its queue entry,
// are also functions of the lease table (see schema.Function), which
// Migrate and a Store's first use create. A Store calls them while they
// are there: through a pooler in transaction mode, which cannot keep
// prepared statements, a statement sent in full is parsed and planned at
// every execution, while PL/pgSQL plans a function's statements once per
// backend and keeps the plans across the transactions the pooler gives
// it (a LANGUAGE sql function would be planned again at every call). The
// call is planned in microseconds. Each function runs the statement's own
// text (the look, the refresh) or its own UPDATE and answer (the renewal,
// which answers the row it renewed without reading it again), so both
// ways check the same: the token, the holder, the expiry on the
// database's clock, the pause, the queue's turns.
//
// A function's name ends in a hash of its definition (see define), and a
// Store calls only functions the lease table's owner owns (see
// schema.Function): another role that may create functions in the
// table's schema cannot put in one that renews without writing.

// hotFunction is one of those functions.
type hotFunction struct {
	// suffix ends its name (schema.Objects.FunctionName), before the
	// hash of its definition.
	suffix string
	// params are its arguments, in order: the statement's parameters and
	// their types.
	params []hotParam
	// returns is its RETURNS clause, the statement's columns.
	returns string
	// body is its PL/pgSQL statements, with the statement's named
	// parameters.
	body string
}

type hotParam struct{ name, typ string }

// lookFunction is queueLookSQL's single-slot look. While the lease is
// live, the common case, it answers from one pass over the queue: every
// entry before this standby's counts, live or not (see queueLookSQL), and
// no entry's turn is read (turn_left_micros is NULL: the caller reads it
// of a free lease only). Else it runs queueLookSQL itself.
var lookFunction = hotFunction{
	suffix: "_look",
	params: []hotParam{{"job", "text"}, {"holder", "text"}, {"id", "text"}, {"first", "bigint"}, {"retry", "bigint"}},
	returns: `TABLE (holder text, token bigint, expires_at timestamptz, released_at timestamptz, last_finished_at timestamptz,
  paused boolean, paused_until timestamptz, paused_at timestamptz, paused_by text, pause_reason text, now timestamptz,
  ahead bigint, turn_left_micros bigint, until_micros bigint, queued boolean, handed boolean, "full" boolean,
  slot integer, slot_holder text, slot_token bigint, slot_expires_at timestamptz)`,
	body: `RETURN QUERY SELECT holder, l.fencing_token AS token, l.expires_at, l.released_at, l.last_finished_at,
    ` + pauseColumns("l") + `,
    a.ahead, NULL::bigint AS turn_left_micros, a.until_micros,
    ` + inQueueHere + ` AS queued,
    ` + handedToHolder + ` AS handed,
    true AS full, NULL::integer AS slot, NULL::text AS slot_holder, NULL::bigint AS slot_token, NULL::timestamptz AS slot_expires_at
  FROM {lease} AS l, LATERAL (
    SELECT count(*) FILTER (WHERE NOT q.passed) AS ahead, max(q.until) FILTER (WHERE q.id = @id::text) - ` + micros("now()") + ` AS until_micros
    FROM (SELECT e.id, e.until, bool_or(e.id = @id::text) OVER (ORDER BY ` + queueOrder + `) AS passed
      FROM jsonb_to_recordset(coalesce(l.queue, '[]'::jsonb)) AS e(id text, priority integer, since bigint, pinned boolean, until bigint)) AS q) AS a
  WHERE l.job_name = @job::text AND l.expires_at > now();
  IF NOT FOUND THEN
    RETURN QUERY ` + queueLookSQL(false) + `;
  END IF;`,
}

// renewFunction is renewSQL: the UPDATE, and the row read afterwards only
// when it renewed nothing (by a statement of its own, which sees what
// committed meanwhile).
var renewFunction = hotFunction{
	suffix:  "_renew",
	params:  []hotParam{{"row", "text"}, {"holder", "text"}, {"token", "bigint"}, {"ttl", "bigint"}},
	returns: `TABLE (renewed boolean, token bigint, holder text, released boolean)`,
	body: renewUpdate + `;
  IF FOUND THEN
    RETURN QUERY SELECT true, @token::bigint, @holder::text, false;
  ELSE
    RETURN QUERY SELECT false, ` + renewRow + `;
  END IF;`,
}

// enterFunction is enterQueueSQL: a row when it entered.
var enterFunction = hotFunction{
	suffix: "_enter",
	params: []hotParam{{"job", "text"}, {"holder", "text"}, {"id", "text"}, {"priority", "integer"},
		{"listening", "boolean"}, {"live", "bigint"}, {"every", "bigint"}},
	returns: `SETOF integer`,
	body: enterQueue + `;
  IF FOUND THEN
    RETURN NEXT 1;
  END IF;`,
}

// hotFunctions are the lease table's functions, in the order Migrate
// creates them.
var hotFunctions = []hotFunction{lookFunction, renewFunction, enterFunction}

// namedParam is a statement's named parameter (@name); @> is an operator.
var namedParam = regexp.MustCompile(`@([a-z_]+)`)

// define is f as o's function: its quoted name, and its signature and
// its CREATE. Its name ends in a short hash of its definition (arguments,
// answer and body, before the tables' names go in: the same in every
// schema), so that a change of any of them is a new function, created by
// the first Store of its version, and wrappers of two versions sharing a
// table during a rolling upgrade each call their own.
func (f hotFunction) define(o schema.Objects) (string, schema.Function) {
	types := make([]string, len(f.params))
	at := map[string]int{}
	for i, p := range f.params {
		types[i], at[p.name] = p.typ, i+1
	}
	// A function's statements name its arguments by position: a name
	// could be taken for a column. The names are rewritten before the
	// tables' names go in, which may hold an @ of their own.
	body := namedParam.ReplaceAllStringFunc(f.body, func(m string) string {
		i, ok := at[m[1:]]
		if !ok {
			panic(fmt.Sprintf("function %s: parameter %s is not an argument", f.suffix, m))
		}
		return fmt.Sprintf("$%d", i)
	})
	args := "(" + strings.Join(types, ",") + ")"
	definition := func(tag, body string) string {
		return args + `
RETURNS ` + f.returns + ` LANGUAGE plpgsql AS ` + tag + `
#variable_conflict use_column
BEGIN
  ` + body + `
END
` + tag
	}
	sum := sha256.Sum256([]byte(definition("", body)))
	name := o.FunctionName(f.suffix + "_" + hex.EncodeToString(sum[:4]))
	// The dollar quote's tag must not occur in the body, where a table's
	// name could hold it.
	body = o.Render(body)
	tag := "$fn$"
	for i := 1; strings.Contains(body, tag); i++ {
		tag = "$fn" + strconv.Itoa(i) + "$"
	}
	return name, schema.Function{Signature: name + args, Create: `CREATE OR REPLACE FUNCTION ` + name + definition(tag, body)}
}

// call is the statement that calls f as o's function, with the
// statement's named parameters.
func (f hotFunction) call(o schema.Objects) string {
	args := make([]string, len(f.params))
	for i, p := range f.params {
		args[i] = "@" + p.name + "::" + p.typ
	}
	name, _ := f.define(o)
	return `SELECT * FROM ` + name + `(` + strings.Join(args, ", ") + `)`
}

// withHotFunctions is o with the functions Migrate creates for it.
func withHotFunctions(o schema.Objects) schema.Objects {
	fns := make([]schema.Function, len(hotFunctions))
	for i, f := range hotFunctions {
		_, fns[i] = f.define(o)
	}
	return o.WithFunctions(fns...)
}

// codeUndefinedFunction is the SQLSTATE of a call of a function that is
// not there.
const codeUndefinedFunction = "42883"

// hot sends a statement the lease table's functions serve, run sending
// the text it is given: the call of the function (call; "" for one that
// has none) while this Store's tables have them, else the statement in
// full (inline). A call of a function that is not there (dropped since
// the tables were checked) is sent again in full, and from then on the
// Store sends its statements in full, warning once.
func (s *Store) hot(call, inline string, run func(query string) error) error {
	if c := s.checked.Load(); call == "" || c == nil || !c.functions {
		return run(inline)
	}
	err := run(call)
	if pgerr.SQLState(err) != codeUndefinedFunction {
		return err
	}
	for {
		c := s.checked.Load()
		if c == nil || !c.functions {
			break
		}
		if s.checked.CompareAndSwap(c, &tablesChecked{hist: c.hist}) {
			s.log.Warn().Str("table", s.cfg.table).Err(err).Msg("the lease table's functions are gone; sending statements in full")
			break
		}
	}
	return run(inline)
}

// warnForeignFunctions says, once a Store's tables are checked, which of
// the lease table's functions it does not call because a role other than
// the table's owner owns them.
func (s *Store) warnForeignFunctions(foreign []string) {
	for _, f := range foreign {
		s.log.Warn().Str("table", s.cfg.table).Str("function", f).
			Msg("the lease table's function is owned by a role other than the table's owner and is not called; sending statements in full")
	}
}
