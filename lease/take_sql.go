package lease

import "strings"

// The take upsert and the lost run it closes are each written once, here:
// the plain take, the take of a slot, of a scheduled time and of a
// requested run all build them from a takeSpec. Every take is conditional
// on the row being free or expired, and on the token and last finish it
// read (see takeSQL for why), and writes takeSet over the row it takes.

// takeSpec is what one kind of take adds to the common upsert.
type takeSpec struct {
	// row is the lease row's name, from is the source of the row to insert
	// ("" for none: one row).
	row, from string
	// read is the CTE whose only row holds the token and last finish the
	// take read.
	read string
	// columns are the columns a take of this kind writes besides the
	// common ones, as name = value: value is inserted, and the update
	// sets the column from excluded (or to value when update is set).
	columns []takeColumn
	// where are this kind's conditions on the row, besides being free or
	// expired and as read.
	where string
	// returning is what the upsert returns besides the token.
	returning string
}

// takeColumn is one column a kind of take writes.
type takeColumn struct {
	name, value string
	// update is what a take over an existing row sets: "" sets the
	// inserted value (excluded.name).
	update string
}

// taken renders the upsert as the CTE "taken".
func (t takeSpec) taken() string {
	names := []string{"job_name", "holder", "expires_at", "fencing_token", "acquired_at", "renewed_at", "last_started_at", "last_holder"}
	values := []string{t.row, "@holder::text", "now() + @ttl::bigint * interval '1 microsecond'", clockToken, "now()", "now()", "now()", "@holder::text"}
	sets := []string{takeSet}
	for _, c := range t.columns {
		if c.value != "" {
			names, values = append(names, c.name), append(values, c.value)
		}
		set := c.update
		if set == "" {
			set = "excluded." + c.name
		}
		sets = append(sets, c.name+" = "+set)
	}
	from := ""
	if t.from != "" {
		from = "\nFROM " + t.from
	}
	return `taken AS (
INSERT INTO {lease} AS l
  (` + strings.Join(names, ", ") + `)
SELECT ` + strings.Join(values, ", ") + from + `
ON CONFLICT (job_name) DO UPDATE SET
  ` + strings.Join(sets, ",\n  ") + `
WHERE l.expires_at <= now() AND ` + t.where + `
  AND l.fencing_token = (SELECT fencing_token FROM ` + t.read + `)
  AND l.last_finished_at IS NOT DISTINCT FROM (SELECT last_finished_at FROM ` + t.read + `)
RETURNING fencing_token` + t.returning + `)`
}

// lostRun is the CTE "lost", added after a take's CTEs: it closes as lost
// the run of a holder that never released (it crashed, or was cut off),
// and as could_not_start a lease handed to a standby that never adopted
// it (handed), from the row as the statement found it (read,
// aliased o, with the columns fencing_token, holder, expires_at,
// acquired_at, renewed_at, last_started_at and last_finished_at), when the
// take happened. The run's attempt is one more than the attempts of its
// lease (job, token) already recorded (--retries). slot is the run's
// slot, where its row (o) may be absent, and scheduledAt its scheduled
// time ("": a take that records none).
func lostRun(read, slot, where, scheduledAt string) string {
	columns, values := "", ""
	if scheduledAt != "" {
		columns, values = ", scheduled_at", ",\n    "+scheduledAt
	}
	return `,
lost AS (
  INSERT INTO {history} (job_name, slot, holder, fencing_token, attempt, started_at, finished_at, outcome` + columns + `)
  SELECT @job::text, ` + slot + `, o.holder, o.fencing_token,
    1 + (SELECT count(*) FROM {history} h WHERE h.job_name = @job::text AND h.fencing_token = o.fencing_token),
    coalesce(o.last_started_at, o.acquired_at), greatest(o.expires_at, o.last_started_at, o.acquired_at),
    CASE WHEN o.last_started_at IS NULL THEN '` + OutcomeCouldNotStart + `' ELSE '` + OutcomeLost + `' END` + values + `
  FROM ` + read + ` o WHERE EXISTS (SELECT FROM taken)` + where + `
    AND (o.last_started_at IS NOT NULL AND o.last_finished_at IS NULL OR ` + handed("o") + `))`
}
