// Command leasewrap runs a command only while this instance holds a lease
// row in PostgreSQL, so that exactly one of N instances runs it. The
// application is package command; this file only starts it.
package main

import (
	"os"

	"github.com/redbite/leasewrap/command"
	"github.com/redbite/leasewrap/signals"

	// The IANA zone database, for --timezone where the host has none
	// (scratch and most minimal images): time.LoadLocation falls back to
	// it after ZONEINFO and the system's copy. A program's main package
	// decides this, not a library (see the package's documentation).
	_ "time/tzdata"
)

func main() { os.Exit(run()) }

// run is leasewrap, from its first instruction to its exit status: main's,
// and the test binary's when the scripts in testdata/ run it as leasewrap.
func run() int {
	// First of all, before a setting is read or a command started: the
	// command, and any process of the same user, cannot read leasewrap's
	// environment (a password) or memory. It cannot fail on Linux, and
	// other systems have no such switch (see docs/guarantees.md).
	_ = signals.Undumpable()
	return command.Run(os.Args, os.Stdout, os.Stderr)
}
