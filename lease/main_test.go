package lease_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// TestMain points the Example at the test database and drops its table.
func TestMain(m *testing.M) {
	os.Setenv("DATABASE_URL", pgtest.URL())
	code := m.Run()
	if conn, err := pgx.Connect(context.Background(), pgtest.URL()); err == nil {
		_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS example_lease")
		conn.Close(context.Background())
	}
	os.Exit(code)
}
