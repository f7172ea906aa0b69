package faulttest

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/internal/testchild"
)

// refusedMessage is the one line leasewrap --require-replicated logs when
// it will not start the command.
const refusedMessage = "not starting the command: --require-replicated, and no standby confirmed the lease"

// TestRequireReplicated runs leasewrap --require-replicated on one
// asynchronous pair, through states that follow each other: each subtest
// leaves the pair as the next one needs it.
func TestRequireReplicated(t *testing.T) {
	t.Parallel()
	pair := pgtest.StartPair(t, false)
	const table = "lease_replicated"
	migrate(t, pair.DSN(), table)
	run := func(t *testing.T, dsn, script string, extra ...string) *lwtest.Proc {
		args := []string{"--database-url", dsn, "--table", table, "--job", "work", "--log-format", "json", "--require-replicated",
			"--ttl", ttl.String(), "--renew-interval", renew.String(), "--grace", grace.String(), "--retry-interval", retry.String()}
		return lwtest.Start(t, binary, []string{lwtest.Child(script)}, append(append(args, extra...), "--", lwtest.Self())...)
	}
	exec := func(t *testing.T, queries ...string) {
		conn := pair.Conn(t)
		defer conn.Close(context.Background())
		for _, q := range queries {
			if _, err := conn.Exec(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}

	t.Run("runs with a standby", func(t *testing.T) {
		p := run(t, pair.DSN(), "ready exit:0")
		p.Expect(t, "ready")
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Fatalf("leasewrap exited %d, want 0", code)
		}
	})

	t.Run("refuses a role that cannot see the standbys", func(t *testing.T) {
		exec(t, `CREATE ROLE lw_plain LOGIN`,
			`GRANT SELECT, INSERT, UPDATE, DELETE ON `+table+`, `+table+`_history TO lw_plain`)
		dsn := strings.Replace(pair.DSN(), "user=postgres", "user=lw_plain", 1)
		before := leaseToken(t, pair, table)
		refused(t, run(t, dsn, "ready exit:0"), `GRANT pg_monitor TO "lw_plain" (or connect as a superuser)`)
		if after := leaseToken(t, pair, table); after != before {
			t.Errorf("the refused take wrote to the lease: token %d, then %d", before, after)
		}
		// The grant the message asks for is enough.
		exec(t, `GRANT pg_monitor TO lw_plain`)
		p := run(t, dsn, "ready exit:0")
		p.Expect(t, "ready")
		if code := p.Wait(t, 15*time.Second); code != 0 {
			t.Fatalf("with pg_monitor, leasewrap exited %d, want 0", code)
		}
	})

	// Replication held back: the standby keeps the lease as it was, and
	// the holder's renewals are not replayed. The child must be gone
	// before the standby's copy of the lease expires, for that is when
	// another instance could take it there after a failover.
	t.Run("stops the child before the standby's copy of its lease expires", func(t *testing.T) {
		history := filepath.Join(t.TempDir(), "history")
		p := run(t, pair.DSN(), "trap record:"+history+" block")
		waitHistory(t, history)
		// Wall clock minus CLOCK_MONOTONIC, to compare the child's end with
		// the server's timestamps (the servers run on this machine).
		offset := time.Now().UnixNano() - testchild.Monotonic()
		pair.HoldBack()
		held := time.Now()
		// Its last replayed renewal came before the hold, so the lease ends
		// a TTL after it at the latest; then the wrapper releases and exits.
		if code := p.Wait(t, ttl+slack); code != 75 {
			t.Errorf("leasewrap exited %d, want 75 (lease lost)", code)
		}
		run := lwtest.ReadHistory(t, history)[0]
		if run.End == 0 {
			t.Fatal("the child did not record its end")
		}
		expires := standbyExpiry(t, pair, table)
		ended := time.Unix(0, run.End+offset)
		t.Logf("child ended %s after the hold, %s before the standby's copy of the lease expired",
			ended.Sub(held).Round(time.Millisecond), expires.Sub(ended).Round(time.Millisecond))
		if !ended.Before(expires) {
			t.Errorf("the child ended at %s, after the standby's copy of its lease expired (%s)",
				ended.Format("15:04:05.000"), expires.Format("15:04:05.000"))
		}
		lost := p.WaitLog(t, "lease lost")
		if msg, _ := lost["error"].(string); !strings.Contains(msg, "no renewal succeeded in time") {
			t.Errorf("lease lost for another reason: %q", msg)
		}
		failed := p.WaitLog(t, "renewal failed")
		if msg, _ := failed["error"].(string); !strings.Contains(msg, "as replicated: not replayed in time") {
			t.Errorf("renewal failed for another reason: %q", msg)
		}
	})

	// Replication still held back: a scheduled take that the standbys do
	// not confirm starts nothing, and its time, claimed by the take, is
	// accounted for in the history as a run that could not start.
	t.Run("accounts for a scheduled time the standbys did not confirm", func(t *testing.T) {
		p := run(t, pair.DSN(), "ready exit:0", "--schedule", "@every 2s", "--once")
		if code := p.Wait(t, ttl+slack); code != 69 {
			t.Errorf("leasewrap exited %d, want 69", code)
		}
		if strings.Contains(p.Logs.String(), "child started") {
			t.Errorf("the child started without a confirmed take: %s", p.Logs)
		}
		conn := pair.Conn(t)
		defer conn.Close(context.Background())
		var claims, unaccounted int
		err := conn.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
  SELECT FROM `+table+`_history h WHERE h.job_name = c.job_name AND h.scheduled_at = c.scheduled_at))
FROM `+table+`_schedule c WHERE c.job_name = 'work' AND c.outcome = 'run'`).Scan(&claims, &unaccounted)
		if err != nil {
			t.Fatal(err)
		}
		if claims == 0 || unaccounted != 0 {
			t.Errorf("%d times claimed as run, %d of them without a history row; want each accounted for", claims, unaccounted)
		}
	})

	// The standby goes away: renewals fail at once (no standby streams),
	// the child is stopped before the lease could expire, and new runs
	// are refused.
	t.Run("stops the child and refuses without a standby", func(t *testing.T) {
		pair.Resume(t)
		history := filepath.Join(t.TempDir(), "history")
		p := run(t, pair.DSN(), "trap record:"+history+" block")
		waitHistory(t, history)
		pair.LoseStandby(t)
		// Its last replayed renewal came before the standby went away.
		if code := p.Wait(t, ttl+slack); code != 75 {
			t.Errorf("leasewrap exited %d, want 75 (lease lost)", code)
		}
		failed := p.WaitLog(t, "renewal failed")
		if msg, _ := failed["error"].(string); !strings.Contains(msg, "no standby streams from the primary") {
			t.Errorf("renewal failed for another reason: %q", msg)
		}
		before := leaseToken(t, pair, table)
		refused(t, run(t, pair.DSN(), "ready exit:0"), "no standby streams from the primary")
		// A standby stands by for one to stream (a failover under way),
		// writing nothing, until --wait-timeout ends it.
		sb := run(t, pair.DSN(), "ready exit:0", "--wait", "--wait-timeout", "2s")
		sb.WaitLog(t, "no standby streams from the primary to confirm a take (--require-replicated); standing by and trying again every retry interval")
		if code := sb.Wait(t, 2*time.Second+slack); code != 124 {
			t.Errorf("a --wait standby without a standby streaming exited %d, want 124 at --wait-timeout", code)
		}
		if after := leaseToken(t, pair, table); after != before {
			t.Errorf("the refused take wrote to the lease: token %d, then %d", before, after)
		}
	})
}

// refused checks that p exited 69 before starting its child, with one
// line at error level, the refusal, whose error says want.
func refused(t *testing.T, p *lwtest.Proc, want string) {
	t.Helper()
	if code := p.Wait(t, 15*time.Second); code != 69 {
		t.Errorf("leasewrap exited %d, want 69", code)
	}
	for line := range p.Lines {
		t.Errorf("the child started and printed %q", line)
	}
	var errs []map[string]any
	for _, e := range p.LogEntries(t) {
		if e["level"] == "error" {
			errs = append(errs, e)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("want one error line, got %d:\n%s", len(errs), p.Logs)
	}
	msg, _ := errs[0]["error"].(string)
	if errs[0]["message"] != refusedMessage || !strings.Contains(msg, want) {
		t.Errorf("the refusal says %q (%q), want %q with %q", errs[0]["message"], msg, refusedMessage, want)
	}
	t.Logf("refusal: %s: %s", errs[0]["message"], msg)
}

// waitHistory waits until a child recorded its start in history.
func waitHistory(t *testing.T, history string) {
	t.Helper()
	pgtest.Eventually(t, 15*time.Second, "the child's start", func() bool { return len(lwtest.ReadHistory(t, history)) > 0 })
}

// leaseToken reads the job's fencing token on the primary (0: no row).
func leaseToken(t *testing.T, pair *pgtest.Pair, table string) int64 {
	t.Helper()
	conn := pair.Conn(t)
	defer conn.Close(context.Background())
	var token int64
	err := conn.QueryRow(context.Background(), `SELECT fencing_token FROM `+pgx.Identifier{table}.Sanitize()+` WHERE job_name = 'work'`).Scan(&token)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return token
}

// standbyExpiry reads when the standby's copy of the job's lease expires.
func standbyExpiry(t *testing.T, pair *pgtest.Pair, table string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pair.Standby().URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var expires time.Time
	if err := conn.QueryRow(ctx, `SELECT expires_at FROM `+pgx.Identifier{table}.Sanitize()+` WHERE job_name = 'work'`).Scan(&expires); err != nil {
		t.Fatal(err)
	}
	return expires
}
