package lease

import (
	"errors"
	"testing"
	"unicode"
)

// Every character unicode.IsSpace reports is refused at either end, and
// named.
func TestCheckEdgesRefusesEveryWhiteSpace(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.IsSpace(r) {
			continue
		}
		if _, ok := spaceNames[r]; !ok {
			t.Errorf("%U is white space without a name", r)
		}
		for _, tc := range []struct {
			name string
			end  bool
		}{{string(r) + "nightly_report", false}, {"nightly_report" + string(r), true}} {
			var e *EdgeSpaceError
			if err := CheckEdges("job name", tc.name); !errors.As(err, &e) || e.Space != r || e.End != tc.end {
				t.Errorf("CheckEdges(%q) = %v, want white space %U at the end: %v", tc.name, err, r, tc.end)
			}
		}
	}
	for _, ok := range []string{"nightly_report", "nightly report", "x", "é"} {
		if err := CheckEdges("job name", ok); err != nil {
			t.Errorf("CheckEdges(%q) = %v, want nil", ok, err)
		}
	}
	want := "a job name may not begin with white space (U+0020 SPACE); remove it"
	if got := CheckEdges("job name", " nightly_report").Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	want = "a holder id may not end with white space (U+00A0 NO-BREAK SPACE); remove it"
	if got := CheckEdges("holder id", "web-1\u00a0").Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
