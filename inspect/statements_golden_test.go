package inspect

import (
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/schema"
)

// TestStatementsGolden renders every statement a Reader sends, for the
// default tables, into testdata/sql: each field of statements, one file
// each, holding exactly the text sent, its parameters named as written;
// and, as name_older_tables.sql, each that reads otherwise from tables of
// an earlier version lacking every column added since (addedColumns),
// which it reads as NULL. Every statement the code sends (golden.Sent)
// must be a field of statements. Rewrite them with
// go test -run TestStatementsGolden -update ./inspect.
func TestStatementsGolden(t *testing.T) {
	o := schema.For(pgx.Identifier{lease.DefaultTable})
	var added []string
	for _, c := range addedColumns {
		added = append(added, c.column)
	}
	current := golden.Fields(t, render(o, nil))
	// Without the output column there is no output to read.
	older := render(o, added)
	older.output = current["output"]
	files := map[string]string{}
	for name, text := range current {
		files[name+".sql"] = text
	}
	for name, text := range golden.Fields(t, older) {
		if text != current[name] {
			files[name+"_older_tables.sql"] = text
		}
	}
	for name, at := range golden.Sent(t) {
		if _, ok := reflect.TypeFor[statements]().FieldByName(name); !ok {
			t.Errorf("%s sends %s, which is not a field of statements", at, name)
		}
	}
	golden.CheckDir(t, "sql", files)
}
