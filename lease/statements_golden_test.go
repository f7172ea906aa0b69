package lease

import (
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/golden"
	"github.com/redbite/leasewrap/schema"
)

// TestStatementsGolden renders every statement a Store sends, for the
// default tables, into testdata/sql: each field of statements (a group's,
// such as sched's, prefixed with the group's name), each of the lease
// table's functions, and the few statements that name no table. A file
// holds exactly the text sent, its parameters named as written, so that
// a diff of the file is a diff of the statement. Rewrite them with
// go test -run TestStatementsGolden -update ./lease.
func TestStatementsGolden(t *testing.T) {
	o := withHotFunctions(schema.For(pgx.Identifier{DefaultTable}))
	files := map[string]string{}
	add := func(name, text string) {
		t.Helper()
		if _, ok := files[name+".sql"]; ok || text == "" {
			t.Fatalf("statement %s is empty or named twice", name)
		}
		files[name+".sql"] = text
	}
	var fields func(prefix string, v reflect.Value)
	fields = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			name := prefix + snakeCase(v.Type().Field(i).Name)
			switch f := v.Field(i); f.Kind() {
			case reflect.String:
				add(name, f.String())
			case reflect.Struct:
				fields(name+"_", f)
			default:
				t.Fatalf("field %s of the statements is neither a statement nor a group of them", name)
			}
		}
	}
	fields("", reflect.ValueOf(newStatements(o)))
	for _, f := range hotFunctions {
		_, fn := f.define(o)
		add("function"+f.suffix, fn.Create)
	}
	add("remote_apply", remoteApply)
	add("standbys", standbysSQL)
	add("probe", probeSQL)
	add("date_style", dateStyleSQL)
	golden.CheckDir(t, "sql", files)
}

// snakeCase is a Go name in snake case: takeSlotsRecording is
// take_slots_recording.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
