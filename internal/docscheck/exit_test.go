package docscheck

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// exitConst declares one of leasewrap's exit statuses: package cmdutil's
// Exit* constants and Check* (the Nagios statuses of check), and package
// runner's Status* (126, 127, and 128 plus a signal's number).
var exitConst = regexp.MustCompile(`(?m)^\s*(?:const\s+)?([Ee]xit[A-Z]\w*|[Cc]heck(?:OK|Warning|Critical|Unknown)|Status[A-Z]\w*)\s*=\s*(\d+)\b`)

var number = regexp.MustCompile(`\d+`)

// documentedStatuses returns the numbers in the first column of a page's
// tables (the status column of docs/exit-status.md, as in "64",
// "126 / 127" or "128+N"). A number elsewhere in a row does not count: a
// status is documented when a row says when it happens.
func documentedStatuses(page string) map[int]bool {
	statuses := map[int]bool{}
	for _, line := range strings.Split(page, "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 3 || cells[0] != "" {
			continue
		}
		for _, n := range number.FindAllString(cells[1], -1) {
			if v, err := strconv.Atoi(n); err == nil {
				statuses[v] = true
			}
		}
	}
	return statuses
}

// TestDocsNameEveryExitStatus wants every exit status the code declares in
// a row of docs/exit-status.md, and no row there for a status the code
// does not declare.
func TestDocsNameEveryExitStatus(t *testing.T) {
	documented := documentedStatuses(read(t, "docs/exit-status.md"))
	declared := map[int][]string{}
	for path, src := range goSources(t) {
		for _, m := range exitConst.FindAllStringSubmatch(src, -1) {
			v, err := strconv.Atoi(m[2])
			if err != nil {
				t.Fatal(err)
			}
			declared[v] = append(declared[v], m[1]+" in "+path)
		}
	}
	if len(declared) < 5 {
		t.Fatalf("found only %d exit statuses declared in the code (%v): update the test", len(declared), declared)
	}
	missing := map[string][]string{}
	for v, from := range declared {
		if !documented[v] {
			sort.Strings(from)
			missing[strconv.Itoa(v)] = from
		}
	}
	report(t, "docs/exit-status.md has no row for status", missing)
	var stale []int
	for v := range documented {
		if declared[v] == nil {
			stale = append(stale, v)
		}
	}
	sort.Ints(stale)
	for _, v := range stale {
		t.Errorf("docs/exit-status.md has a row for status %d, which no constant in the code declares", v)
	}
}

// The status column alone counts: a number in the text of a row does not
// document a status.
func TestDocumentedStatusesReadsTheStatusColumnOnly(t *testing.T) {
	page := "| status | when |\n|---|---|\n| 0 | done |\n| 126 / 127 | not executable, or see 64 |\n" +
		"| 128+N | a signal |\nexits 70 on a bug\n"
	got := documentedStatuses(page)
	want := map[int]bool{0: true, 126: true, 127: true, 128: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("documentedStatuses = %v, want %v", got, want)
	}
}
