package golden

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Sent lists the statements the package under test sends: for each call
// of a method named Exec, Query, QueryRow or Queue in its non-test files,
// the name of what gives the statement (a constant, a variable, a field,
// or the function that builds it), with where it is first sent. A
// statement written in place of that name (a literal, a concatenation)
// fails the test: every statement has a name, which a golden test can
// check it renders.
func Sent(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	sent := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			t.Helper()
			arg := statementArg(n)
			if arg == nil {
				return true
			}
			at := fset.Position(arg.Pos()).String()
			name := statementName(arg)
			if name == "" {
				t.Errorf("%s sends a statement written in place: give it a name the golden files can render", at)
			} else if _, ok := sent[name]; !ok {
				sent[name] = at
			}
			return true
		})
	}
	return sent
}

// statementArg is the statement n sends, when n is a call of Exec, Query
// or QueryRow (after the context) or of Queue (first); else nil.
func statementArg(n ast.Node) ast.Expr {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return nil
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	i := 1
	switch sel.Sel.Name {
	case "Exec", "Query", "QueryRow":
	case "Queue":
		i = 0
	default:
		return nil
	}
	if len(call.Args) <= i {
		return nil
	}
	return call.Args[i]
}

// statementName is the name that gives the statement e: an identifier's,
// a field's, or that of the function whose call builds it; "" for
// anything else.
func statementName(e ast.Expr) string {
	if call, ok := e.(*ast.CallExpr); ok {
		e = call.Fun
	}
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}
