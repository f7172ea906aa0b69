package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/monitor"
	"github.com/redbite/leasewrap/runner"
	"github.com/redbite/leasewrap/signals"
)

// runAction is the main command: hold the lease on --job, run the child while
// it holds, release it, and exit with the child's status.
func runAction(c *cli.Context, child []string, hasChild bool) error {
	if !hasChild {
		child = c.Args().Slice()
	}
	if len(child) == 0 {
		return usagef("missing command: put it after --, as in leasewrap --job nightly_report -- ./generate-report")
	}
	job := c.String("job")
	if job == "" {
		return usagef("missing --job (or LEASEWRAP_JOB): name the lease, as in --job nightly_report")
	}
	if err := lease.CheckJob(job); err != nil {
		return usagef("invalid --job: %v", err)
	}
	if _, err := lease.ParseTable(c.String("table")); err != nil {
		return usagef("invalid --table: %v", err)
	}
	if err := checkTimings(c); err != nil {
		return err
	}
	if c.Duration("wait-timeout") > 0 && !c.Bool("wait") {
		return usagef("--wait-timeout %s needs --wait", c.Duration("wait-timeout"))
	}
	if code := c.Int("skip-exit-code"); code < 0 || code > 255 {
		return usagef("invalid --skip-exit-code %d: must be 0-255", code)
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	path, err := runner.LookPath(child[0])
	if err != nil {
		return err
	}

	// Catch the forwarded signals from the start: before the child exists, a
	// signal that asks to end leasewrap ends it without holding a lease.
	sigs, stopSignals := signals.Notify()
	defer stopSignals()

	pool, err := connect(c)
	if err != nil {
		return err
	}
	defer closePool(pool)
	holder := c.String("id")
	if holder == "" {
		holder = lease.DefaultHolder()
	}
	// The store adds the job to its own lines.
	log = log.With().Str("holder", holder).Logger()
	storeLog := log
	log = log.With().Str("job", job).Logger()
	mon := monitor.New(job, holder, c.Duration("ttl"))
	if addr := c.String("http-addr"); addr != "" {
		stop, bound, err := monitor.Serve(addr, mon.Handler())
		if err != nil {
			return usagef("cannot serve --http-addr %q: %v", addr, err)
		}
		defer stop()
		log.Info().Str("http_addr", bound.String()).Msg("serving /healthz, /leader and /metrics")
	}
	store, err := lease.New(pool,
		lease.WithTable(c.String("table")),
		lease.WithHolder(holder),
		lease.WithTTL(c.Duration("ttl")),
		lease.WithRenewInterval(c.Duration("renew-interval")),
		lease.WithRetryInterval(c.Duration("retry-interval")),
		lease.WithGrace(c.Duration("grace")),
		lease.WithHoldFor(c.Duration("hold-for")),
		lease.WithLogger(storeLog),
		lease.WithObserver(mon),
		lease.WithListen(c.Bool("listen")),
	)
	if err != nil {
		return usagef("%v", err)
	}

	l, err := acquire(c, store, pool, job, sigs, log)
	if err != nil {
		return err
	}
	log = log.With().Int64("fencing_token", l.Token()).Logger()
	log.Info().Stringer("ttl", store.TTL()).Msg("acquired")
	// A signal to end that came just as the lease was taken: do not start.
	select {
	case sig := <-sigs:
		if signals.Ends(sig) {
			release(l.Abandon(context.Background()), log)
			log.Info().Str("signal", sig.String()).Msg("stopped by signal before the command started")
			return &runner.ExitError{Code: runner.ExitSignalBase + signals.Number(sig)}
		}
	default:
	}
	mon.Leading(l)
	defer mon.NotLeading()

	cmd := exec.Command(path, child[1:]...)
	cmd.Args[0] = child[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LEASEWRAP_JOB="+job,
		"LEASEWRAP_HOLDER="+holder,
		"LEASEWRAP_FENCING_TOKEN="+strconv.FormatInt(l.Token(), 10),
		"LEASEWRAP_TABLE="+store.Table(),
	)
	cfg := runner.Config{
		Grace:   c.Duration("grace"),
		Margin:  lease.SafetyMargin(store.TTL()),
		Signals: sigs,
		Log:     log,
		Started: mon.ChildStarted,
	}
	if signals.NeedReaper() {
		cfg.Reaper = signals.NewReaper()
	}
	res := runner.Run(cmd, l, cfg)
	if res.Started {
		mon.ChildExited(res.Status)
		release(l.Release(context.Background(), &res.Status), log)
	} else {
		release(l.Abandon(context.Background()), log)
	}
	if res.Code() == 0 {
		return nil
	}
	return &runner.ExitError{Code: res.Code()}
}

// closePool closes the pool but waits at most a second: closing a connection
// to a server that stopped answering can take far longer, and leasewrap's
// exit must not wait for it.
func closePool(pool *pgxpool.Pool) {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
}

// connect opens the pool, refusing a connection string it cannot parse
// without repeating it.
func connect(c *cli.Context) (*pgxpool.Pool, error) {
	pool, err := lease.Connect(c.Context, c.String("database-url"))
	if err != nil {
		return nil, usagef("invalid --database-url (or LEASEWRAP_DATABASE_URL, DATABASE_URL): %v", err)
	}
	return pool, nil
}

// acquire takes the lease once (cron) or stands by for it (--wait). A
// signal that ends leasewrap while it has no child cancels the attempt.
func acquire(c *cli.Context, store *lease.Store, pool *pgxpool.Pool, job string, sigs <-chan os.Signal, log zerolog.Logger) (*lease.Lease, error) {
	ctx, cancel := context.WithCancelCause(c.Context)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		received os.Signal
	)
	watchDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case sig := <-sigs:
				if signals.Ends(sig) {
					received = sig
					cancel(errSignal)
					return
				}
				log.Debug().Str("signal", sig.String()).Msg("ignoring signal: no child yet")
			case <-watchDone:
				return
			}
		}
	}()

	var (
		l   *lease.Lease
		err error
	)
	if c.Bool("wait") {
		wctx := ctx
		if d := c.Duration("wait-timeout"); d > 0 {
			var wcancel context.CancelFunc
			wctx, wcancel = context.WithTimeoutCause(ctx, d, errWaitTimeout)
			defer wcancel()
		}
		l, err = store.Acquire(wctx, job)
		if err != nil && wctx.Err() != nil {
			err = context.Cause(wctx)
		}
	} else {
		l, err = store.TryAcquire(ctx, job)
		if err != nil && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	}
	close(watchDone)
	wg.Wait()

	// A signal that came while the statement was already on its way: hand the
	// lease straight back.
	if err == nil && received != nil {
		release(l.Abandon(context.Background()), log)
		err = errSignal
	}
	var held *lease.HeldError
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, errSignal):
		log.Info().Str("signal", received.String()).Msg("stopped by signal before the command started")
		return nil, &runner.ExitError{Code: runner.ExitSignalBase + signals.Number(received)}
	case errors.Is(err, errWaitTimeout):
		log.Warn().Stringer("wait_timeout", c.Duration("wait-timeout")).Msg("gave up standing by: --wait-timeout passed")
		return nil, &runner.ExitError{Code: runner.ExitWaitTimeout}
	case errors.As(err, &held):
		log.Info().Str("current_holder", held.Holder).Stringer("expires_in", held.ExpiresIn.Round(time.Millisecond)).
			Int64("current_token", held.Token).Msg("skipped: lease held by another instance")
		return nil, &runner.ExitError{Code: c.Int("skip-exit-code")}
	default:
		return nil, unavailable(err, pool, log)
	}
}

var (
	errSignal      = errors.New("stopped by signal")
	errWaitTimeout = errors.New("wait timeout")
)

// release logs how handing the lease back went; a failure only means the
// lease runs out by itself.
func release(err error, log zerolog.Logger) {
	switch {
	case err == nil:
		log.Info().Msg("released")
	case errors.Is(err, lease.ErrLost):
		log.Debug().Err(err).Msg("nothing to release")
	default:
		log.Warn().Err(err).Msg("release failed; the lease will expire after its TTL")
	}
}

// unavailable logs why the lease store could not be used, naming the
// database hosts and never the password, and returns EX_UNAVAILABLE.
func unavailable(err error, pool *pgxpool.Pool, log zerolog.Logger) error {
	cfg := pool.Config().ConnConfig
	msg := strings.ReplaceAll(lease.Redact(err.Error(), &cfg.Config), "\n\t", "; ")
	log.Error().Str("database", lease.Hosts(&cfg.Config)).Str("error", msg).Msg("lease store unavailable")
	return &runner.ExitError{Code: runner.ExitUnavailable}
}
