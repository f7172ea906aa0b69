package cmdutil

import (
	"fmt"
	"io"
	"regexp"
	"slices"

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
	return Usagef("%s (see %s --help)", flagError(err.Error(), flagNames(c)), name)
}

// flagNames are the names of the flags c's command takes, its own and the
// app's, for a "did you mean".
func flagNames(c *cli.Context) []string {
	flags := c.App.Flags
	if c.Command != nil {
		flags = append(slices.Clone(flags), c.Command.Flags...)
	}
	var names []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		names = append(names, f.Names()...)
	}
	return names
}

// urfave/cli's words for a flag it does not know or a boolean it cannot
// read, which name the flag with one dash and pass on strconv's.
var (
	unknownFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	badBool     = regexp.MustCompile(`^invalid boolean value "(.*)" for -+(\S+): parse error$`)
	badEnvBool  = regexp.MustCompile(`^could not parse "(.*)" as bool value from environment variable "(\S+)" for flag (\S+): `)
)

// flagError says msg, urfave/cli's error, as leasewrap's other settings
// errors do: the flag as written, with two dashes, and what is valid (for
// an unknown flag, the one of names it is likely a typo of). Any other
// message is left as it is.
func flagError(msg string, names []string) string {
	const bools = "want true or false (or 1, 0, t, f)"
	if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		if near := Nearest(m[1], names); near != "" {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", m[1], near)
		}
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
