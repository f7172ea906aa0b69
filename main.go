// Command leasewrap runs a command only while this instance holds a lease
// row in PostgreSQL, so that exactly one of N instances runs it.
package main

import "os"

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}
