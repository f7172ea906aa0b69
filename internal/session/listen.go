package session

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Subscription receives the notifications of one channel that a Conn
// hears, in order, from its Listen until its Close or until the
// connection is lost.
type Subscription struct {
	c       *Conn
	channel string

	mu     sync.Mutex
	queue  []string
	lost   bool
	closed bool
	// ready holds a wake-up when there is something to read.
	ready chan struct{}
}

// Listen subscribes to channel on the connection, connecting when there
// is none: it LISTENs unless the connection listens on channel already.
//
// It listens only when the server process that runs the LISTEN is the
// connection's own, the one whose key the server gave at connect, and
// fails with ErrShared otherwise: a pooler answers with a key of its own,
// and in transaction mode it lends that process to other clients once
// the transaction ends, where a LISTEN would stay behind, keep sending
// them notifications, and confuse the pooler (PgBouncer logs "got packet
// 'A' from server when not linked"). The check and the LISTEN are one
// transaction, on one server process, and the LISTEN is rolled back when
// the check fails: nothing is left behind on a process the pooler shares.
// A TCP proxy keeps the key, and the session. Once it found a pooler's
// process, it fails so at once: the connections it makes reach the same.
func (c *Conn) Listen(ctx context.Context, channel string) (*Subscription, error) {
	if err := c.take(ctx, target{}); err != nil {
		return nil, err
	}
	defer c.give()
	s := &Subscription{c: c, channel: channel, ready: make(chan struct{}, 1)}
	c.mu.Lock()
	subs, ok := c.chans[channel]
	if ok {
		c.chans[channel] = append(subs, s)
	}
	shared := c.shared
	c.mu.Unlock()
	switch {
	case ok:
		return s, nil
	case shared:
		return nil, ErrShared
	}
	alone, err := c.listenAlone(ctx, channel)
	switch {
	case err != nil:
		return nil, err
	case !alone:
		c.mu.Lock()
		c.shared = true
		c.mu.Unlock()
		return nil, ErrShared
	}
	c.mu.Lock()
	c.chans[channel] = []*Subscription{s}
	c.mu.Unlock()
	c.waiterOnce.Do(func() { go c.waiter() })
	return s, nil
}

// listenAlone LISTENs on channel, under turn, only when the server process
// is the connection's own (see Listen).
func (c *Conn) listenAlone(ctx context.Context, channel string) (alone bool, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("LISTEN " + pgx.Identifier{channel}.Sanitize())
	b.Queue("SELECT pg_backend_pid()").QueryRow(func(r pgx.Row) error {
		var pid int64
		err := r.Scan(&pid)
		alone = pid == int64(c.conn.PgConn().PID())
		return err
	})
	if err := c.conn.SendBatch(ctx, b).Close(); err != nil {
		// A transaction left open drops the connection (give): the
		// LISTEN never committed.
		return false, err
	}
	end := "ROLLBACK"
	if alone {
		end = "COMMIT"
	}
	_, err = c.conn.Exec(ctx, end)
	return alone && err == nil, err
}

// waiter waits for notifications while the connection is idle and
// listens, until the Conn is closed.
func (c *Conn) waiter() {
	defer close(c.waiterDone)
	for {
		select {
		case <-c.poke:
		case <-c.done:
			return
		}
		for c.waitOnce() {
		}
	}
}

// waitOnce takes the turn when no statement wants it and the connection
// listens, waits for a notification until a statement wants the turn,
// hands what it heard to the subscriptions, and reports whether it
// waited.
func (c *Conn) waitOnce() bool {
	c.mu.Lock()
	if c.closed || c.users > 0 || len(c.chans) == 0 {
		c.mu.Unlock()
		return false
	}
	select {
	case <-c.turn:
	default:
		c.mu.Unlock()
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopWait = cancel
	conn := c.conn
	c.mu.Unlock()
	n, err := conn.WaitForNotification(ctx)
	c.mu.Lock()
	c.stopWait = nil
	c.mu.Unlock()
	broken := err != nil && ctx.Err() == nil
	cancel()
	if n != nil {
		c.deliver(n.Channel, n.Payload)
	}
	if broken || conn.IsClosed() {
		c.drop()
	}
	c.turn <- struct{}{}
	return true
}

// deliver hands payload to channel's subscriptions.
func (c *Conn) deliver(channel, payload string) {
	c.mu.Lock()
	subs := c.chans[channel]
	c.mu.Unlock()
	for _, s := range subs {
		s.push(payload)
	}
}

func (s *Subscription) push(payload string) {
	s.mu.Lock()
	s.queue = append(s.queue, payload)
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) lose() {
	s.mu.Lock()
	s.lost = true
	s.mu.Unlock()
	s.signal()
}

func (s *Subscription) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Wait returns the next notification's payload, waiting for it until ctx
// ends (ctx's error). Once the connection is lost, and what it heard
// before has been read, it fails with ErrLost.
func (s *Subscription) Wait(ctx context.Context) (string, error) {
	for {
		s.mu.Lock()
		switch {
		case len(s.queue) > 0:
			p := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return p, nil
		case s.lost:
			s.mu.Unlock()
			return "", ErrLost
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Lost reports whether the connection the subscription listened on was
// lost.
func (s *Subscription) Lost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Close ends the subscription. The last one of its channel on the
// connection UNLISTENs, within ctx: where it cannot, the connection goes
// on listening, and the notifications are dropped.
func (s *Subscription) Close(ctx context.Context) {
	s.mu.Lock()
	if s.closed || s.lost {
		s.closed = true
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	c := s.c
	if err := c.take(ctx, target{existing: true}); err != nil {
		c.mu.Lock()
		c.unsubscribe(s)
		c.mu.Unlock()
		return
	}
	defer c.give()
	c.mu.Lock()
	last := c.unsubscribe(s)
	c.mu.Unlock()
	if !last {
		return
	}
	if _, err := c.conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return
	}
	c.mu.Lock()
	if len(c.chans[s.channel]) == 0 {
		delete(c.chans, s.channel)
	}
	c.mu.Unlock()
}

// unsubscribe takes s off its channel, under mu, and reports whether s
// was its channel's last subscription on the connection.
func (c *Conn) unsubscribe(s *Subscription) bool {
	subs, ok := c.chans[s.channel]
	if !ok {
		return false
	}
	kept := subs[:0:0]
	for _, x := range subs {
		if x != s {
			kept = append(kept, x)
		}
	}
	c.chans[s.channel] = kept
	return len(kept) == 0 && len(subs) > 0
}
