package golden

import (
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// Fields returns the string fields of the struct v, exported or not, by
// their names in snake case (takeSlots is take_slots); those of a struct
// field are named after it too (sched_take). It is how a golden test
// enumerates a package's statements, so that a field added has its file.
// A field of another kind, or empty, fails the test.
func Fields(t testing.TB, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t.Helper()
		for i := range v.NumField() {
			name := prefix + snakeCase(v.Type().Field(i).Name)
			switch f := v.Field(i); f.Kind() {
			case reflect.String:
				if f.String() == "" {
					t.Fatalf("field %s is empty", name)
				}
				out[name] = f.String()
			case reflect.Struct:
				walk(name+"_", f)
			default:
				t.Fatalf("field %s is neither a string nor a struct of them", name)
			}
		}
	}
	walk("", reflect.ValueOf(v))
	return out
}

// snakeCase is a Go name in snake case.
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
