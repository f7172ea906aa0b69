// Package session is one PostgreSQL connection shared by a wrapper's
// statements and its LISTENs, so that a leader, a standby or a scheduler
// holds a single backend of the server, whatever it does.
//
// A Conn connects on its first statement and again on the first statement
// after its connection broke. Its users take turns: a statement holds the
// connection until its answer is read (a Row until Scan, Rows until
// closed, a Tx until it ends, a batch until closed), as a pool would lend
// one of its connections. Between statements, while anything listens, the
// connection waits for notifications; the next statement ends that wait
// (pgx keeps a connection whose wait was cut short usable), and
// notifications that arrive during a statement are kept by pgx for the
// next wait. Each is handed to the subscriptions of its channel.
//
// A statement whose ctx ends while it is in flight makes pgx close the
// connection (after asking the server to cancel it), as it would a
// pool's: every subscription is then lost (ErrLost), and the next
// statement connects anew. Callers give their statements deadlines that
// fit them, not ones that only hurry them.
package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrClosed is the error of a statement on a closed Conn.
var ErrClosed = errors.New("session closed")

// ErrLost is a subscription's error once the connection it listened on
// broke or was closed: a notification may have been missed. A new
// subscription listens on the next connection.
var ErrLost = errors.New("the listening connection was lost")

// ErrShared is Listen's error when the server process that ran the LISTEN
// is not the connection's own (see Conn.Listen): a pooler's, which it
// lends to other clients. Nothing was left listening.
var ErrShared = errors.New("the connection reaches a server process that is not its own (a pooler's)")

// ErrReplaced is a Pinned statement's error once the connection its first
// statement ran on was replaced.
var ErrReplaced = errors.New("the session's connection was replaced")

// closeTimeout bounds the close of a broken or dropped connection, which
// a server that stopped answering could otherwise hold up.
const closeTimeout = time.Second

// Config is how a Conn connects.
type Config struct {
	// ConnConfig is the connection's configuration; its Tracer, if set,
	// sees every statement.
	ConnConfig *pgx.ConnConfig
	// AfterConnect, if set, runs on each new connection before its first
	// statement; an error fails that statement, and the connection is
	// closed.
	AfterConnect func(context.Context, *pgx.Conn) error
}

// Conn is one PostgreSQL connection, made when first needed and again
// after it broke, shared by goroutines in turn, which can LISTEN on it.
// It has what *pgxpool.Pool has for statements: Exec, Query, QueryRow,
// Begin and SendBatch.
type Conn struct {
	cfg Config

	// turn holds one token; whoever took it uses conn: a statement until
	// its answer is read, or the waiter between statements.
	turn chan struct{}
	// conn is the connection (nil: none yet, or it broke) and gen counts
	// the connections made; both are changed only under turn.
	conn *pgx.Conn
	gen  uint64

	mu sync.Mutex
	// users counts the statements that want the turn or have it: the
	// waiter waits only while there are none.
	users int
	// stopWait ends the waiter's wait for notifications; nil while it
	// does not wait.
	stopWait context.CancelFunc
	// chans are the channels conn listens on, each with its
	// subscriptions (none when an UNLISTEN failed: it still listens).
	// Channels are added and removed under turn and mu; a channel's
	// subscriptions change under mu (a Subscription's Close that cannot
	// have the turn still takes itself off).
	chans  map[string][]*Subscription
	closed bool
	// shared is set once a LISTEN found the server process not the
	// connection's own: a pooler's, which its connections keep reaching.
	shared bool

	// poke wakes the waiter (one pending wake-up is enough); done ends it.
	poke       chan struct{}
	done       chan struct{}
	waiterOnce sync.Once
	waiterDone chan struct{}
}

// New returns a Conn that connects as cfg says on its first statement.
func New(cfg Config) *Conn {
	c := &Conn{
		cfg:        cfg,
		turn:       make(chan struct{}, 1),
		chans:      map[string][]*Subscription{},
		poke:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		waiterDone: make(chan struct{}),
	}
	c.turn <- struct{}{}
	return c
}

// Adopt returns a Conn that uses conn, already connected, until it
// breaks, and then connects as cfg says.
func Adopt(conn *pgx.Conn, cfg Config) *Conn {
	c := New(cfg)
	c.conn, c.gen = conn, 1
	return c
}

// Config returns a copy of the configuration, for a Conn made like this
// one (with a tracer of its own, say).
func (c *Conn) Config() Config {
	return Config{ConnConfig: c.cfg.ConnConfig.Copy(), AfterConnect: c.cfg.AfterConnect}
}

// target says which connection a statement may run on. The zero target
// is any: the one there is, or a new one.
type target struct {
	// existing is the one there is, if any (else ErrLost): the statement
	// never connects (Sync, an UNLISTEN).
	existing bool
	// gen, if set, names the one a Pinned view's statements run on (else
	// ErrReplaced); 0: the one its first statement gets, which gen then
	// names.
	gen *uint64
}

// take waits for the connection's turn, ending the waiter's wait, and
// makes sure there is a connection that on allows.
func (c *Conn) take(ctx context.Context, on target) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.users++
	if c.stopWait != nil {
		c.stopWait()
	}
	c.mu.Unlock()
	select {
	case <-c.turn:
	case <-ctx.Done():
		c.mu.Lock()
		c.users--
		c.mu.Unlock()
		c.wake()
		return ctx.Err()
	}
	err := c.ready(ctx, on)
	if err != nil {
		c.give()
	}
	return err
}

// ready makes sure, under turn, that there is a connection to use.
func (c *Conn) ready(ctx context.Context, on target) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case on.existing && c.conn == nil:
		return ErrLost
	case on.gen != nil && *on.gen != 0 && (c.conn == nil || c.gen != *on.gen):
		return ErrReplaced
	case c.conn == nil:
		if err := c.connect(ctx); err != nil {
			return err
		}
	}
	if on.gen != nil {
		*on.gen = c.gen
	}
	return nil
}

// connect makes a new connection, under turn.
func (c *Conn) connect(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.cfg.ConnConfig)
	if err != nil {
		return err
	}
	if c.cfg.AfterConnect != nil {
		if err := c.cfg.AfterConnect(ctx, conn); err != nil {
			closeConn(conn)
			return err
		}
	}
	c.conn = conn
	c.gen++
	return nil
}

// give hands the turn back. A connection that broke meanwhile, or was
// left inside a transaction, is dropped: the next statement connects
// anew.
func (c *Conn) give() {
	if c.conn != nil && (c.conn.IsClosed() || c.conn.PgConn().TxStatus() != 'I') {
		c.drop()
	}
	c.mu.Lock()
	c.users--
	c.mu.Unlock()
	c.turn <- struct{}{}
	c.wake()
}

// drop closes the connection, under turn, and tells its subscriptions
// that it is lost.
func (c *Conn) drop() {
	conn := c.conn
	c.conn = nil
	c.mu.Lock()
	chans := c.chans
	c.chans = map[string][]*Subscription{}
	c.mu.Unlock()
	for _, subs := range chans {
		for _, s := range subs {
			s.lose()
		}
	}
	closeConn(conn)
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
	// A connection that pgx closed itself, after a statement cancelled in
	// flight, sends the server a cancel request on its way out: a process
	// that exits meanwhile cuts it short, which leaves a pooler half a
	// client (PgBouncer 1.18 crashes on one). Wait for it, within the
	// same bound.
	select {
	case <-conn.PgConn().CleanupDone():
	case <-ctx.Done():
	}
}

// wake asks the waiter to look whether it should wait.
func (c *Conn) wake() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Close closes the connection and ends every subscription (ErrLost);
// later statements fail with ErrClosed. A statement under way ends first.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.stopWait != nil {
		c.stopWait()
	}
	c.mu.Unlock()
	close(c.done)
	<-c.turn
	if c.conn != nil {
		c.drop()
	}
	c.turn <- struct{}{}
	c.waiterOnce.Do(func() { close(c.waiterDone) })
	<-c.waiterDone
}

// Connected reports whether the Conn holds a connection now.
func (c *Conn) Connected() bool {
	select {
	case <-c.turn:
		connected := c.conn != nil
		c.turn <- struct{}{}
		c.wake() // the waiter may have found the turn taken
		return connected
	default:
		// In use: a statement or the waiter has it.
		return true
	}
}

// Exec runs sql, as pgx.Conn.Exec does, on the connection.
func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.exec(ctx, target{}, sql, args...)
}

func (c *Conn) exec(ctx context.Context, on target, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := c.take(ctx, on); err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.give()
	return c.conn.Exec(ctx, sql, args...)
}

// Query runs sql, as pgx.Conn.Query does: the connection is the rows'
// until they are closed, or Next returns false.
func (c *Conn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.query(ctx, target{}, sql, args...)
}

func (c *Conn) query(ctx context.Context, on target, sql string, args ...any) (pgx.Rows, error) {
	if err := c.take(ctx, on); err != nil {
		return nil, err
	}
	rows, err := c.conn.Query(ctx, sql, args...)
	if err != nil {
		c.give()
		return nil, err
	}
	return &turnRows{Rows: rows, turn: turn{c}}, nil
}

// QueryRow runs sql, as pgx.Conn.QueryRow does: the connection is the
// row's until Scan.
func (c *Conn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := c.take(ctx, target{}); err != nil {
		return errRow{err}
	}
	return &turnRow{Row: c.conn.QueryRow(ctx, sql, args...), turn: turn{c}}
}

// Begin starts a transaction: the connection is the transaction's until
// it commits or rolls back.
func (c *Conn) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := c.take(ctx, target{}); err != nil {
		return nil, err
	}
	tx, err := c.conn.Begin(ctx)
	if err != nil {
		c.give()
		return nil, err
	}
	return &turnTx{Tx: tx, turn: turn{c}}, nil
}

// SendBatch sends b in one pipeline: the connection is the batch's until
// its results are closed.
func (c *Conn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return c.sendBatch(ctx, target{}, b)
}

func (c *Conn) sendBatch(ctx context.Context, on target, b *pgx.Batch) pgx.BatchResults {
	if err := c.take(ctx, on); err != nil {
		return errBatch{err}
	}
	return &turnBatch{BatchResults: c.conn.SendBatch(ctx, b), turn: turn{c}}
}

// Sync proves the connection alive with a bare Sync message, without
// connecting when there is no connection (ErrLost): PostgreSQL answers it
// with ReadyForQuery and starts no transaction, where any statement (an
// empty one, pgx's Ping, included) is a transaction that xact_commit
// counts. A keepalive so costs the database a wakeup, not a commit. A
// notification that arrives meanwhile is kept for the subscriptions.
func (c *Conn) Sync(ctx context.Context) error {
	if err := c.take(ctx, target{existing: true}); err != nil {
		return err
	}
	defer c.give()
	p := c.conn.PgConn().StartPipeline(ctx)
	err := p.Sync()
	if err == nil {
		_, err = p.GetResults()
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}

// Pin returns a view of the Conn whose statements all run on one
// connection: the one its first statement runs on. Once that connection
// is replaced, its statements fail with ErrReplaced: what a statement
// reads about the server (its WAL position, say) then stays about the
// server that ran the earlier ones.
func (c *Conn) Pin() *Pinned { return &Pinned{c: c} }

// Pinned is a view of a Conn bound to one of its connections (see Pin).
type Pinned struct {
	c   *Conn
	gen uint64
}

// Exec is Conn.Exec on the pinned connection.
func (p *Pinned) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.c.exec(ctx, target{gen: &p.gen}, sql, args...)
}

// Query is Conn.Query on the pinned connection.
func (p *Pinned) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.c.query(ctx, target{gen: &p.gen}, sql, args...)
}

// SendBatch is Conn.SendBatch on the pinned connection.
func (p *Pinned) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.c.sendBatch(ctx, target{gen: &p.gen}, b)
}

// turn is a statement's hold on the connection, handed back once.
type turn struct{ c *Conn }

func (t *turn) giveBack() {
	if t.c != nil {
		t.c.give()
		t.c = nil
	}
}

// turnRows are a statement's rows: they hand the turn back once closed.
type turnRows struct {
	pgx.Rows
	turn
}

func (r *turnRows) Next() bool {
	if r.c == nil {
		return false
	}
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *turnRows) Scan(dest ...any) error {
	err := r.Rows.Scan(dest...)
	if err != nil {
		r.Close()
	}
	return err
}

func (r *turnRows) Close() {
	r.Rows.Close()
	r.giveBack()
}

// turnRow is a statement's row: it hands the turn back once scanned.
type turnRow struct {
	pgx.Row
	turn
}

func (r *turnRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	r.giveBack()
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// turnTx is a transaction: it hands the turn back once it ended.
type turnTx struct {
	pgx.Tx
	turn
}

func (t *turnTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.giveBack()
	return err
}

func (t *turnTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.giveBack()
	return err
}

// turnBatch is a pipeline's results: they hand the turn back once
// closed.
type turnBatch struct {
	pgx.BatchResults
	turn
}

func (b *turnBatch) Close() error {
	err := b.BatchResults.Close()
	b.giveBack()
	return err
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil } // part of pgx.BatchResults
