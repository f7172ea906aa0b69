package escape

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"nightly_report":  "nightly_report",
		"ünïcode ok":      "ünïcode ok",
		"a\x1b[2Jb":       `a\x1b[2Jb`,
		"cr\rlf\n":        `cr\rlf\n`,
		"csi\u009b1":      `csi\u009b1`,
		"rlo\u202eevil":   `rlo\u202eevil`,
		"tab\tcol":        `tab\tcol`,
		"bad\xffutf8":     `bad\xffutf8`,
		`back\slash`:      `back\\slash`,
		"real\ufffdchar":  "real\ufffdchar",
		"nbsp\u00a0space": `nbsp\u00a0space`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	// Two different names never print the same.
	if Printable("x\x1b") == Printable(`x\x1b`) {
		t.Error(`"x\x1b" and the name written x\x1b print the same`)
	}
}

// Whatever a name holds, the JSON stays valid, decodes to the exact name,
// and shows a terminal nothing it would act on or hide.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{"plain", "a\x1bb", "\u009b", "\u202e", "\U0001F600", "\xff", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		var buf bytes.Buffer
		if err := JSON(&buf, map[string]string{"job": name}); err != nil {
			t.Fatal(err)
		}
		var back map[string]string
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, buf.Bytes())
		}
		want, _ := json.Marshal(name) // invalid UTF-8 becomes U+FFFD, as encoding/json does
		var wantName string
		_ = json.Unmarshal(want, &wantName)
		if back["job"] != wantName {
			t.Fatalf("decoded %q, want %q", back["job"], wantName)
		}
		for _, r := range buf.String() {
			if r != '\n' && !unicode.IsPrint(r) && r != 0xfffd {
				t.Fatalf("output holds %U raw: %q", r, buf.String())
			}
		}
	})
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\tline\n":             "plain\tline\n",
		"C:\\dir\n":                 "C:\\dir\n",
		"\x1b[2Jcleared\r\n":        `\x1b[2Jcleared\r` + "\n",
		"bad \xff utf-8, \u202eRTL": `bad \xff utf-8, \u202eRTL`,
		"nul \x00, C1 \u009b":       `nul \x00, C1 \u009b`,
		"über ✓":                    "über ✓",
	} {
		if got := string(Text([]byte(in))); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
