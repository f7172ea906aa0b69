package cmdutil

import "strings"

// Nearest is the one of names that word is most likely a typo of, for a
// "did you mean": the only name word begins (at least three characters of
// it, as --hold of --hold-for), else the closest within two edits, or ""
// when none is.
func Nearest(word string, names []string) string {
	prefixOf := ""
	for _, name := range names {
		if name == word {
			return ""
		}
		if len(word) >= 3 && strings.HasPrefix(name, word) {
			if prefixOf != "" && prefixOf != name {
				prefixOf = "-" // several: no one guess
			} else {
				prefixOf = name
			}
		}
	}
	if prefixOf != "" && prefixOf != "-" {
		return prefixOf
	}
	best, bestDist := "", 3
	for _, name := range names {
		if d := editDistance(word, name); d < bestDist && d < len(name) {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and swaps
// of two neighbours that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
