package lease_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redbite/leasewrap/lease"
)

// Run a job on exactly one of the processes that share a database.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := lease.New(pool, lease.WithTable("example_lease"))
	if err != nil {
		log.Fatal(err)
	}
	// Do waits for the lease, runs the function while holding it, and
	// releases it afterwards. ctx is cancelled if leadership is in doubt.
	err = store.Do(ctx, "nightly_report", func(ctx context.Context, l *lease.Lease) error {
		fmt.Println("leading", l.Job(), "with a fencing token:", l.Token() > 0)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: leading nightly_report with a fencing token: true
}
