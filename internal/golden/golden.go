// Package golden compares a test's output with a file under testdata/, or
// rewrites the file when the tests run with -update.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares got with testdata/name, or writes it there with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	check(t, filepath.Join("testdata", name), got)
}

// CheckDir compares each of files (name to content) with the file of
// that name in testdata/dir, or with -update writes them there and
// removes every other file of the directory. A file there that files
// lacks fails the test: it is the golden file of something no longer
// rendered.
func CheckDir(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	path := filepath.Join("testdata", dir)
	if *update {
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; ok {
			continue
		}
		stale := filepath.Join(path, e.Name())
		if !*update {
			t.Errorf("%s is the golden file of nothing %s renders (rerun with -update to remove it)", stale, t.Name())
		} else if err := os.Remove(stale); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		check(t, filepath.Join(path, name), files[name])
	}
}

// check compares got with the file at path, or writes it there with
// -update.
func check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%v (run go test -run %s -update to create it)", err, t.Name())
		return
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (rerun with -update if the change is meant):\n%s", t.Name(), path, got)
	}
}
