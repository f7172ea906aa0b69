package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var usageFlag = regexp.MustCompile(`--[a-z0-9][a-z0-9.-]*[a-z0-9]`)

// TestSynopsisNamesTheUsageFlags wants each subcommand's lines in the
// command-line synopsis of docs/configuration.md to name every flag its
// `leasewrap SUB --help` names in USAGE: the synopsis is where a reader
// looks first, and it must not show less than the help does.
func TestSynopsisNamesTheUsageFlags(t *testing.T) {
	dir := helpDir(t)
	rootHelp, err := os.ReadFile(filepath.Join(dir, "help-root.txt"))
	if err != nil {
		t.Fatal(err)
	}
	config := read(t, "docs/configuration.md")
	missing := map[string][]string{}
	for _, sub := range subcommands(t, string(rootHelp)) {
		help, err := os.ReadFile(filepath.Join(dir, "help-"+sub+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		_, after, ok := strings.Cut(string(help), "\nUSAGE:\n")
		if !ok {
			t.Fatalf("help-%s.txt has no USAGE: section: update the test", sub)
		}
		usage, _, _ := strings.Cut(after, "\n")
		var synopsis strings.Builder
		for _, line := range strings.Split(config, "\n") {
			if f := strings.Fields(line); strings.HasPrefix(line, "    leasewrap ") && len(f) > 1 && f[1] == sub {
				synopsis.WriteString(line + "\n")
			}
		}
		if synopsis.Len() == 0 {
			missing["leasewrap "+sub] = append(missing["leasewrap "+sub], "help-"+sub+".txt")
			continue
		}
		for _, flag := range usageFlag.FindAllString(usage, -1) {
			if !mentions(synopsis.String(), flag) {
				w := "leasewrap " + sub + " " + flag
				missing[w] = append(missing[w], "the USAGE of help-"+sub+".txt")
			}
		}
	}
	report(t, "docs/configuration.md's command-line synopsis does not name", missing)
}
