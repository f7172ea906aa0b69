package lease

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/schema"
)

// TestStatementsGolden renders every statement a Store sends, for the
// default tables, into testdata/sql: each field of statements (a group's,
// such as sched's, prefixed with the group's name), the CREATE of each of
// the lease table's functions, and the few statements that name no
// table. A file holds exactly the text sent, its parameters named as
// written, so that a diff of the file is a diff of the statement. Rewrite
// them with go test -run TestStatementsGolden -update ./lease.
func TestStatementsGolden(t *testing.T) {
	o := withHotFunctions(schema.For(pgx.Identifier{DefaultTable}))
	statements := golden.Fields(t, newStatements(o))
	for _, f := range hotFunctions {
		_, fn := f.define(o)
		statements["function"+f.suffix] = fn.Create
	}
	statements["remote_apply"] = remoteApply
	statements["standbys"] = standbysSQL
	statements["probe"] = probeSQL
	statements["date_style"] = dateStyleSQL
	files := map[string]string{}
	for name, text := range statements {
		files[name+".sql"] = text
	}
	golden.CheckDir(t, "sql", files)
}
