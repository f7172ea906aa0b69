package libs_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The list is leasewrap's: every package outside the standard library and
// this module that one of leasewrap's packages imports. A library added to
// leasewrap and not here would make the start-up reference too cheap.
func TestLinksWhatLeasewrapLinks(t *testing.T) {
	want := thirdParty(t, "github.com/redbite/leasewrap")
	got := thirdParty(t, "github.com/redbite/leasewrap/bench/libs")
	if !slices.Equal(got, want) {
		t.Errorf("bench/libs imports\n  %s\nleasewrap imports\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// thirdParty lists the packages outside the standard library and this
// module that pkg, or any package of this module it depends on, imports.
func thirdParty(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps",
		"-f", `{{if and (not .Standard) (eq .Module.Path "github.com/redbite/leasewrap")}}{{join .Imports "\n"}}{{end}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var found []string
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !strings.HasPrefix(p, "github.com/redbite/leasewrap") {
			found = append(found, p)
		}
	}
	slices.Sort(found)
	return slices.Compact(found)
}
