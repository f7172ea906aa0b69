package lwtest

import (
	"testing"

	"github.com/redbite/leasewrap/inspect"
)

// Reader opens an inspect.Reader on table, or fails the test. It lives
// here, not in pgtest: lease's own tests use pgtest, and inspect imports
// lease.
func Reader(t testing.TB, db inspect.DB, table string) *inspect.Reader {
	t.Helper()
	r, err := inspect.Open(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
