package schema

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/golden"
)

// TestStatementsGolden renders every statement the package sends, for the
// default tables, into testdata/sql, one file each, holding exactly the
// text sent, its parameters named as written: the catalog reads, the
// shape checks, and the DDL of a migration. An upgrade is rendered from
// the oldest table Migrate upgrades (the three-column lease table, a
// history table of the first version); the function given to the table's
// owner, and the owner, are samples (the lease package writes the
// functions, and renders their CREATE). Every statement the code
// sends (golden.Sent) must be rendered here, so that a new one cannot go
// without its file. Rewrite them with
// go test -run TestStatementsGolden -update ./schema.
func TestStatementsGolden(t *testing.T) {
	o := For(pgx.Identifier{"leader_lease"})
	leaseMissing, setNotNull := oldest(t, Leases)
	historyMissing, _ := oldest(t, Runs)
	type statement struct{ file, sends, text string }
	statements := []statement{
		{"catalog", "catalogSQL", catalogSQL},
		{"requests_index", "requestsIndexSQL", requestsIndexSQL},
		{"lease_shape", "leaseShapeSQL", leaseShapeSQL},
		{"history_shape", "historyShapeSQL", historyShapeSQL},
		{"lock_timeout", "lockTimeoutSQL", lockTimeoutSQL},
		{"lock", "lockSQL", lockSQL},
		{"create_lease_table", "createSQL", Leases.createSQL(o.Lease)},
		{"create_history_table", "createSQL", Runs.createSQL(o.History)},
		{"create_claims_table", "createSQL", Claims.createSQL(o.Claims)},
		{"create_requests_index", "createRequestsIndexSQL", o.createRequestsIndexSQL()},
		{"create_check_function", "createCheckSQL", o.createCheckSQL()},
		{"upgrade_lease_table", "upgradeLeaseSQL", o.upgradeLeaseSQL(leaseMissing, setNotNull)},
		{"upgrade_history_table", "upgradeHistorySQL", o.upgradeHistorySQL(historyMissing)},
		{"history_savepoint", "historySavepointSQL", historySavepointSQL},
		{"history_rollback", "historyRollbackSQL", historyRollbackSQL},
		{"functions_savepoint", "functionsSavepointSQL", functionsSavepointSQL},
		{"functions_rollback", "functionsRollbackSQL", functionsRollbackSQL},
		{"owner", "ownerSQL", ownerSQL},
		{"alter_function_owner", "alterOwnerSQL", alterOwnerSQL(Function{Signature: o.FunctionName("_look") + "(text)"}, "postgres")},
	}
	for _, cols := range Runs.Indexes {
		statements = append(statements, statement{"create_history_index_" + strings.ReplaceAll(cols, ", ", "_"), "createIndexSQL",
			createIndexSQL(o.History, cols)})
	}
	// The lease table's own functions are the lease package's, which
	// renders them (lease/testdata/sql/function_*.sql).
	rendered := map[string]bool{"Create": true}
	files := map[string]string{}
	for _, s := range statements {
		files[s.file+".sql"] = s.text
		rendered[s.sends] = true
	}
	for name, at := range golden.Sent(t) {
		if !rendered[name] {
			t.Errorf("%s sends %s, which TestStatementsGolden does not render", at, name)
		}
	}
	golden.CheckDir(t, "sql", files)
}

// oldest is what Migrate adds to the oldest table of t's kind it
// upgrades, one of its core columns alone (keyed on Key, which is NOT
// NULL), and the NOT NULLs it sets.
func oldest(t *testing.T, table Table) (missing, setNotNull []string) {
	cat := catalog{kind: table.Kinds[0], pk: table.PrimaryKey, keyed: true}
	if table.Key != "" {
		cat.pk = []string{table.Key}
	}
	for _, c := range table.Columns {
		if c.Core {
			cat.names, cat.types = append(cat.names, c.Name), append(cat.types, c.Type)
			cat.notNull, cat.filled = append(cat.notNull, c.Name == table.Key), append(cat.filled, false)
		}
	}
	missing, setNotNull, mismatch := table.check(cat)
	if mismatch != nil || len(missing) == 0 {
		t.Fatalf("the oldest %s is not upgraded: %v", table.What, mismatch)
	}
	return missing, setNotNull
}
