// Package escape makes text from the lease table safe to print. Job names
// and holder ids are whatever was written to the table (by an older version,
// or by hand with psql): a terminal would act on the escape sequences,
// carriage returns and direction overrides among them.
package escape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Printable escapes what a terminal would act on or hide (escape
// sequences, carriage returns, tabs that would break the columns, C1
// controls such as U+009B, direction overrides such as U+202E, invalid
// UTF-8) the way Go quotes them, and doubles backslashes so that no two
// names print the same: "x\x1b" and a name written `x\x1b` stay apart.
func Printable(s string) string {
	if !strings.ContainsFunc(s, needsEscape) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && isInvalid(s[i:]):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			q := strconv.QuoteRune(r) // '\x1b', '\r', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isInvalid(s string) bool {
	_, size := utf8.DecodeRuneInString(s)
	return size <= 1
}

func needsEscape(r rune) bool {
	return r == '\\' || !unicode.IsPrint(r) && r != ' ' || r == unicode.ReplacementChar
}

// JSON writes v as indented JSON, with every character a terminal would act
// on or hide written as a \u escape. encoding/json escapes only those below
// U+0020: a C1 control or a direction override would reach the terminal
// raw. The escapes decode to the same strings, so scripts see the exact
// names.
func JSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(SafeJSON(buf.Bytes()))
	return err
}

// SafeJSON rewrites the characters of encoded JSON that a terminal would
// act on or hide as \u escapes; outside strings JSON has none.
func SafeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, hidden) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if !hidden(r) {
			out = append(out, b[:size]...)
		} else if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		b = b[size:]
	}
	return out
}

// hidden is a character that is not printable and that encoding/json
// leaves raw: DEL, and those above ASCII (it escapes the other ASCII
// controls, and replaces invalid UTF-8).
func hidden(r rune) bool {
	return r == 0x7f || r >= utf8.RuneSelf && !unicode.IsPrint(r) && r != utf8.RuneError
}

// Text escapes output meant for a terminal that holds many lines, such as
// what a run printed: as Printable, but newlines and tabs are kept, and
// backslashes are left alone (the text is shown, not told apart from
// another).
func Text(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, b[0])
		case r == '\n' || r == '\t' || r == '\\' || !needsEscape(r):
			out = append(out, b[:size]...)
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\r', '\u202e'
			out = append(out, q[1:len(q)-1]...)
		}
		b = b[size:]
	}
	return out
}
