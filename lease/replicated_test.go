package lease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// A server no standby streams from cannot confirm a take: under
// WithRequireReplicated both Acquire (without waiting) and TryAcquire
// refuse with ErrNotReplicated, at once and without taking the lease;
// without the option the same server hands it out.
func TestRequireReplicatedWithoutStandby(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t)
	pool, err := pgxpool.New(ctx(t), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newStore(t, pool, "replicated", "a", lease.WithRequireReplicated(true))
	if _, err := s.Acquire(ctx(t), "job"); !errors.Is(err, lease.ErrNotReplicated) || errors.Is(err, lease.ErrStandbysHidden) {
		t.Fatalf("Acquire: %v, want ErrNotReplicated (no standby)", err)
	}
	if _, err := s.TryAcquire(ctx(t), "job"); !errors.Is(err, lease.ErrNotReplicated) {
		t.Fatalf("TryAcquire: %v, want ErrNotReplicated", err)
	} else {
		t.Log(err)
	}
	var n int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM replicated`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused takes left %d lease rows (%v)", n, err)
	}
	l, err := newStore(t, pool, "replicated", "b").TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatalf("without WithRequireReplicated: %v", err)
	}
	if err := l.Release(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// A role without pg_monitor cannot read the standbys' replay positions:
// it is refused with ErrStandbysHidden, before anything is taken.
func TestRequireReplicatedHiddenStandbys(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t)
	admin, err := pgx.Connect(ctx(t), c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{`CREATE ROLE plain LOGIN`, `GRANT CREATE ON SCHEMA public TO plain`} {
		if _, err := admin.Exec(ctx(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = "plain"
	pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := newStore(t, pool, "leases", "a", lease.WithRequireReplicated(true))
	_, err = s.Acquire(ctx(t), "job")
	if !errors.Is(err, lease.ErrStandbysHidden) || !errors.Is(err, lease.ErrNotReplicated) {
		t.Fatalf("Acquire as a role without pg_monitor: %v, want ErrStandbysHidden", err)
	}
	t.Log(err)
	var n int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM leases`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused take left %d lease rows (%v)", n, err)
	}
}
