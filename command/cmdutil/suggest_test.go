package cmdutil

import "testing"

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"stauts", "status", 1}, {"status", "status", 0}, {"hisotry", "history", 1}, {"relase", "release", 1}, {"foo", "status", 6}, {"", "help", 4}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// A word is taken for the one name it begins, or for a name within two
// edits; a word that begins several names, or is far from all, gets no
// guess.
func TestNearest(t *testing.T) {
	names := []string{"hold-for", "help", "renew-interval", "retry-interval", "retry-delay", "status", "ttl"}
	for _, tc := range []struct{ word, want string }{
		{"hold", "hold-for"}, {"stauts", "status"}, {"tll", "ttl"}, {"retry-interva", "retry-interval"},
		{"re", ""}, {"ret", ""}, {"xyzzy", ""}, {"status", ""},
	} {
		if got := Nearest(tc.word, names); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}
