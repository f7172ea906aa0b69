package docscheck

import (
	"regexp"
	"strings"
	"testing"
)

// testLine finds the README's test command: the line that runs the whole
// suite under CI=true.
var testLine = regexp.MustCompile(`(?m)^\s+(CI=true go test [^#\n]*?)\s*(#.*)?$`)

// TestReadmeTestLineIsWhatCIRuns wants the README's test command to be the
// one .ci/run runs, word for word, and .ci/run to install what the README
// says to install first: a line that is not what happens is worse than
// none.
func TestReadmeTestLineIsWhatCIRuns(t *testing.T) {
	readme, run := read(t, "README.md"), read(t, ".ci/run")
	m := testLine.FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no test line (CI=true go test ...)")
	}
	if !strings.Contains(run, m[1]) {
		t.Errorf(".ci/run does not run the README's test line %q", m[1])
	}
	if !strings.Contains(readme, ".ci/install") || !strings.Contains(run, ".ci/install") {
		t.Error("README.md and .ci/run should both name .ci/install, which installs what the suite drives")
	}
}
