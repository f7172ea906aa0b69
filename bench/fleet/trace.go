package main

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/session"
	"github.com/redbite/leasewrap/lease"
)

// Marks of the lease package's statements that a standby writes the
// lease row with: every take (lease/take_sql.go, takeSpec.taken) and the
// adopt of a lease handed to it (lease/queue_sql.go, adoptSQL).
const (
	takeMark  = "taken AS (\nINSERT INTO"
	adoptMark = "RETURNING fencing_token AS token, coalesce(slot, 1) AS slot"
)

// counts are the statements the participants sent, since the fleet
// started: all of them, and the takes and adopts sent while standing by,
// whether they took anything or not.
type counts struct {
	statements, takes, adopts atomic.Int64
}

// tracer counts one incarnation's statements in counts, as they are sent.
// It is on the connection configuration, so that it sees every statement
// of the incarnation's connection.
type tracer struct {
	counts *counts
	// standing is set while the incarnation stands by (until Acquire
	// returns): its takes and adopts are counted as the standby's.
	standing atomic.Bool
}

// sent counts one statement of text sql.
func (t *tracer) sent(sql string) {
	t.counts.statements.Add(1)
	if !t.standing.Load() {
		return
	}
	switch {
	case strings.Contains(sql, takeMark):
		t.counts.takes.Add(1)
	case strings.Contains(sql, adoptMark):
		t.counts.adopts.Add(1)
	}
}

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.sent(data.SQL)
	return ctx
}

func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts every statement of a pipeline when it is sent.
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	for _, q := range data.Batch.QueuedQueries {
		t.sent(q.SQL)
	}
	return ctx
}

func (t *tracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// connect is lease.ConnectSession with t on its connection: the session
// is made anew from the configuration lease.ConnectSession builds (it
// connects nothing before the first statement), so that a participant
// connects exactly as a wrapper does, whatever lease.ConnectSession comes
// to set.
func connect(url string, t *tracer) (*session.Conn, error) {
	c, err := lease.ConnectSession(url)
	if err != nil {
		return nil, err
	}
	cfg := c.Config()
	c.Close()
	cfg.ConnConfig.Tracer = t
	return session.New(cfg), nil
}
