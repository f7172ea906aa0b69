package lease

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// EdgeSpaceError is a name with white space at its start or end: " nightly_report"
// is another job than "nightly_report", and a stray space in an environment
// file or a YAML value would let both run at once.
type EdgeSpaceError struct {
	Kind  string // what the name names: "job name", "holder id"
	Space rune   // the white space found
	End   bool   // at the end rather than the start
}

func (e *EdgeSpaceError) Error() string {
	where := "begin"
	if e.End {
		where = "end"
	}
	return fmt.Sprintf("a %s may not %s with white space (%s); remove it", e.Kind, where, RuneName(e.Space))
}

// CheckEdges reports white space (unicode.IsSpace) at either end of name, a
// kind such as "job name", as an *EdgeSpaceError.
func CheckEdges(kind, name string) error {
	if r, _ := utf8.DecodeRuneInString(name); unicode.IsSpace(r) {
		return &EdgeSpaceError{Kind: kind, Space: r}
	}
	if r, _ := utf8.DecodeLastRuneInString(name); unicode.IsSpace(r) {
		return &EdgeSpaceError{Kind: kind, Space: r, End: true}
	}
	return nil
}

// spaceNames are the Unicode names of the characters unicode.IsSpace
// reports, which no terminal tells apart.
var spaceNames = map[rune]string{
	'\t': "CHARACTER TABULATION", '\n': "LINE FEED", '\v': "LINE TABULATION", '\f': "FORM FEED",
	'\r': "CARRIAGE RETURN", ' ': "SPACE", 0x85: "NEXT LINE", 0xA0: "NO-BREAK SPACE",
	0x1680: "OGHAM SPACE MARK", 0x2000: "EN QUAD", 0x2001: "EM QUAD", 0x2002: "EN SPACE",
	0x2003: "EM SPACE", 0x2004: "THREE-PER-EM SPACE", 0x2005: "FOUR-PER-EM SPACE",
	0x2006: "SIX-PER-EM SPACE", 0x2007: "FIGURE SPACE", 0x2008: "PUNCTUATION SPACE",
	0x2009: "THIN SPACE", 0x200A: "HAIR SPACE", 0x2028: "LINE SEPARATOR",
	0x2029: "PARAGRAPH SEPARATOR", 0x202F: "NARROW NO-BREAK SPACE",
	0x205F: "MEDIUM MATHEMATICAL SPACE", 0x3000: "IDEOGRAPHIC SPACE",
}

// RuneName writes r as "U+0020 SPACE" when it is white space, else as
// "U+202E".
func RuneName(r rune) string {
	if name, ok := spaceNames[r]; ok {
		return fmt.Sprintf("%U %s", r, name)
	}
	return fmt.Sprintf("%U", r)
}
