package command

import (
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/command/wrap"
)

// What leasewrap reads in argv before urfave/cli does (see Run): the
// child's command line after "--", a subcommand's name after flags, "help"
// and --version, and unknown words with the subcommand they are a typo of.
// urfave/cli's own error messages are reworded in cmdutil.UsageError.

// helpAndVersion turns "help", "help SUBCOMMAND" and --version, the words
// people try first, into what leasewrap reads: --help, "SUBCOMMAND --help"
// and the version subcommand.
func helpAndVersion(args []string, cmds []*cli.Command) ([]string, error) {
	bools := BoolFlags(cmds)
	i := firstWord(args, bools)
	switch {
	case i == 0 && hasFlag(args, "version", bools):
		return []string{args[0], "version"}, nil
	case i == 0 || args[i] != "help":
		return args, nil
	}
	rest := append([]string{args[0]}, args[i+1:]...)
	k := firstWord(rest, bools)
	if k == 0 {
		return []string{args[0], "--help"}, nil
	}
	for _, c := range cmds {
		if c.HasName(rest[k]) {
			return []string{args[0], c.Name, "--help"}, nil
		}
	}
	return nil, unknownWord(rest[k], cmds)
}

// unknownCommand refuses a word among leasewrap's own arguments (before
// any "--") that is no subcommand, as git and kubectl do, and says which
// subcommand it is likely a typo of. Without "--", a word that names a
// program (a path, or one found in $PATH) is the command to run, as
// "leasewrap --job x ./report" has always been read.
func unknownCommand(args []string, cmds []*cli.Command, hasChild bool) error {
	i := firstWord(args, BoolFlags(cmds))
	if i == 0 {
		return nil
	}
	word := args[i]
	if !hasChild {
		if strings.Contains(word, "/") {
			return nil
		}
		if _, err := exec.LookPath(word); err == nil {
			return nil
		}
	}
	return unknownWord(word, cmds)
}

// unknownWord is the error for word, which names no subcommand.
func unknownWord(word string, cmds []*cli.Command) error {
	if near := nearest(word, cmds); near != "" {
		return cmdutil.Usagef("unknown command %q; did you mean %q? (a command to run goes after --)", word, near)
	}
	return cmdutil.Usagef("unknown command %q: see leasewrap --help (a command to run goes after --)", word)
}

// nearest is the subcommand name (or "help") word is likely a typo of
// (cmdutil.Nearest), or "".
func nearest(word string, cmds []*cli.Command) string {
	names := []string{"help"}
	for _, c := range cmds {
		names = append(names, c.Names()...)
	}
	return cmdutil.Nearest(word, names)
}

// splitChild splits args at the first "--": leasewrap's own arguments before
// it, the child's command line after it.
func splitChild(args []string) (own, child []string, found bool) {
	for i, a := range args {
		if i > 0 && a == "--" {
			return args[:i], args[i+1:], true
		}
	}
	return args, nil, false
}

// subcommandFirst finds the subcommand named among args (the first word that
// is not a flag or a flag's value) and moves it in front of every flag. It
// returns args unchanged, and nil, when there is none.
func subcommandFirst(args []string, cmds []*cli.Command) ([]string, *cli.Command) {
	i := firstWord(args, BoolFlags(cmds))
	if i == 0 {
		return args, nil
	}
	for _, c := range cmds {
		if c.HasName(args[i]) {
			reordered := append([]string{args[0], args[i]}, args[1:i]...)
			return append(reordered, args[i+1:]...), c
		}
	}
	return args, nil
}

// firstWord is the index in args (args[0] is the program's name) of the
// first word that is neither a flag nor a flag's value, or 0 when there is
// none. bools names the flags that take no value.
func firstWord(args []string, bools map[string]bool) int {
	for i := 1; i < len(args); i++ {
		name, hasValue, isFlag := cmdutil.FlagName(args[i])
		if !isFlag {
			return i
		}
		if !hasValue && !bools[name] {
			i++ // the flag's value
		}
	}
	return 0
}

// hasFlag reports whether args hold flag name itself (not as another
// flag's value).
func hasFlag(args []string, name string, bools map[string]bool) bool {
	for i := 1; i < len(args); i++ {
		n, hasValue, isFlag := cmdutil.FlagName(args[i])
		if !isFlag {
			continue
		}
		if n == name {
			return true
		}
		if !hasValue && !bools[n] {
			i++
		}
	}
	return false
}

// BoolFlags names the flags that take no value, for finding the subcommand
// among flags.
func BoolFlags(cmds []*cli.Command) map[string]bool {
	bools := map[string]bool{"help": true, "h": true}
	add := func(flags []cli.Flag) {
		for _, f := range flags {
			if _, ok := f.(*cli.BoolFlag); ok {
				for _, n := range f.Names() {
					bools[n] = true
				}
			}
		}
	}
	add(wrap.RunFlags())
	for _, c := range cmds {
		add(c.Flags)
	}
	return bools
}
