package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goSources returns the text of every non-test Go file of the repository,
// by path relative to its root. The tests read the code wherever it lives,
// so that moving a file between packages does not blind them.
func goSources(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel(path)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// helpDir finds the directory of the help golden files (help-root.txt and
// one help-SUB.txt per subcommand), wherever the command's tests keep them.
func helpDir(t *testing.T) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "help-root.txt" {
			found = append(found, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("want one help-root.txt golden file in the repository, found %d (%v): update the test", len(found), found)
	}
	return found[0]
}

// subcommands lists the subcommands in the COMMANDS: section of
// `leasewrap --help` (help-root.txt), leaving out urfave/cli's own help.
func subcommands(t *testing.T, helpRoot string) []string {
	t.Helper()
	_, after, ok := strings.Cut(helpRoot, "\nCOMMANDS:\n")
	if !ok {
		t.Fatal("help-root.txt has no COMMANDS: section: update the test")
	}
	var subs []string
	for _, line := range strings.Split(after, "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		if sub := strings.TrimSuffix(strings.Fields(line)[0], ","); sub != "help" {
			subs = append(subs, sub)
		}
	}
	if len(subs) == 0 {
		t.Fatal("no subcommands read from help-root.txt: update the test")
	}
	return subs
}
