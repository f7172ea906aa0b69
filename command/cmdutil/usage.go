package cmdutil

import (
	"fmt"
	"io"
	"regexp"

	"github.com/urfave/cli/v2"
)

// Report prints err's one line, if it has one, and returns its exit status.
func Report(stderr io.Writer, err error) int {
	code, msg := ExitCode(err)
	if msg != nil {
		fmt.Fprintf(stderr, "leasewrap: %v\n", msg)
	}
	return code
}

// UsageError keeps urfave/cli from printing the whole help for a bad flag:
// one line says what was wrong.
func UsageError(c *cli.Context, err error, _ bool) error {
	name := "leasewrap"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name += " " + c.Command.Name
	}
	return Usagef("%s (see %s --help)", flagError(err.Error()), name)
}

// urfave/cli's words for a flag it does not know or a boolean it cannot
// read, which name the flag with one dash and pass on strconv's.
var (
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	badBool     = regexp.MustCompile(`^invalid boolean value "(.*)" for -+(\S+): parse error$`)
	badEnvBool  = regexp.MustCompile(`^could not parse "(.*)" as bool value from environment variable "(\S+)" for flag (\S+): `)
)

// flagError says msg, urfave/cli's error, as leasewrap's other settings
// errors do: the flag as written, with two dashes, and what is valid. Any
// other message is left as it is.
func flagError(msg string) string {
	const bools = "want true or false (or 1, 0, t, f)"
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := badBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid --%s %q: %s", m[2], m[1], bools)
	}
	if m := badEnvBool.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid %s (--%s) %q: %s", m[2], m[3], m[1], bools)
	}
	return msg
}

// NoArgs refuses arguments a subcommand does not take.
func NoArgs(c *cli.Context) error {
	if c.Args().Present() {
		return Usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().First())
	}
	return nil
}
