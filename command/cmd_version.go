package command

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// buildVersion is set at release time with
// -ldflags "-X github.com/redbite/leasewrap/command.buildVersion=1.2.3".
var buildVersion string

func Version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

func VersionCommand() *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print leasewrap's version",
		OnUsageError: UsageError,
		Action: func(c *cli.Context) error {
			if err := NoArgs(c); err != nil {
				return err
			}
			return Printed(fmt.Fprintf(c.App.Writer, "leasewrap %s\n", Version()))
		},
	}
}
