//go:build !urfave_cli_no_docs

package main

import (
	"io"
	"strings"
	"testing"

	"github.com/redbite/leasewrap/command"
)

// The man page's SYNOPSIS is how to call leasewrap (the command after --,
// the subcommands), not a flat list of flags; it has examples, and its
// exit statuses name the ones subcommands add.
func TestManPageSaysHowToCallIt(t *testing.T) {
	roff, err := manRoff(command.NewApp(io.Discard, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	synopsis := roff[strings.Index(roff, ".SH SYNOPSIS"):strings.Index(roff, ".SH DESCRIPTION")]
	if !strings.Contains(synopsis, `leasewrap [flags] \-\- COMMAND [ARG...]`) || strings.Contains(synopsis, "[--ttl]") {
		t.Errorf("SYNOPSIS:\n%s\nwant the usage lines, not every flag", synopsis)
	}
	for _, want := range []string{".SH EXAMPLES", `\-\-schedule '0 2 * * *'`, `a \-\-once line's \-\-schedule`, "trigger: the job has no schedule recorded"} {
		if !strings.Contains(roff, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
}
