package release

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/pgtest"
	"github.com/redbite/leasewrap/lease"
)

// release --id OLD that looked the lease up just before it was handed to
// NEW finds no lease of OLD's to release: it says that NEW holds it, with
// exit 1, and NEW keeps it.
func TestReleaseRacingAHandoffSaysWhoHoldsTheLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := pgtest.Pool(t)
	table := pgtest.Table(t, pool)
	store := func(holder string) *lease.Store {
		s, err := lease.New(pool, lease.WithTable(table), lease.WithHolder(holder), lease.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	read, err := inspect.Open(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	old, err := store("OLD").TryAcquire(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	seen, err := read.Status(ctx, "victim")
	if err != nil || len(seen) != 1 || seen[0].Holder != "OLD" {
		t.Fatalf("look-up: %v, %+v", err, seen)
	}
	// The handoff, between release's look-up and its release.
	if err := old.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	next, err := store("NEW").TryAcquire(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if err := next.StartAttempt(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = next.Release(ctx, nil) }()

	r := request{job: "victim", id: "OLD", slot: 1}
	_, _, err = releaseSeen(ctx, read, store("operator"), r, seen[0])
	var exit *cmdutil.ExitError
	if !errors.As(err, &exit) || exit.Code != cmdutil.ExitNotFound {
		t.Fatalf("got %v, want exit %d", err, cmdutil.ExitNotFound)
	}
	want := regexp.MustCompile(`^"victim" is not held by OLD: it is held by NEW since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ; nothing released$`)
	if !want.MatchString(exit.Err.Error()) {
		t.Errorf("got %q, want it to match %s", exit.Err, want)
	}
	now, err := read.Status(ctx, "victim")
	if err != nil || now[0].Holder != "NEW" || now[0].State != lease.StateHeld {
		t.Errorf("after the refusal: %v, %+v; want NEW still holding", err, now)
	}
}
