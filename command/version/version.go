package version

import (
	"fmt"
	"runtime/debug"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/urfave/cli/v2"
)

// buildVersion is set at release time with
// -ldflags "-X github.com/redbite/leasewrap/command/version.buildVersion=1.2.3".
var buildVersion string

// String is leasewrap's version: the release's, else the module's, else "(devel)".
func String() string {
	if buildVersion != "" {
		return buildVersion
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// Command is the version subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print leasewrap's version",
		OnUsageError: cmdutil.UsageError,
		Action: func(c *cli.Context) error {
			if err := cmdutil.NoArgs(c); err != nil {
				return err
			}
			return cmdutil.Printed(fmt.Fprintf(c.App.Writer, "leasewrap %s\n", String()))
		},
	}
}
