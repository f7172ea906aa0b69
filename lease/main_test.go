package lease_test

import (
	"os"
	"testing"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// TestMain points the Example at the test database. Its table is left in
// place: another test run may be using it.
func TestMain(m *testing.M) {
	os.Setenv("DATABASE_URL", pgtest.URL())
	os.Exit(m.Run())
}
