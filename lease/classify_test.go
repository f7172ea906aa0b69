package lease_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/lease"
)

// A release the role may no longer make says it is a privilege problem,
// not an outage: the error matches ErrPermission, as every other
// statement's does.
func TestReleaseWithoutPrivilegeSaysSo(t *testing.T) {
	t.Parallel()
	admin, schema, table, quoted := migratedSchema(t)
	pool := leastPrivileged(t, admin, schema)
	l, err := newStore(t, pool, table, "low").TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, `REVOKE UPDATE ON `+quoted+` FROM `+pgx.Identifier{testRole(schema)}.Sanitize())
	if err := l.Release(ctx(t), nil); !errors.Is(err, lease.ErrPermission) {
		t.Errorf("release without UPDATE: %v, want an error matching ErrPermission", err)
	}
}
