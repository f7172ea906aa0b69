package command

import (
	"fmt"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// buildVersion is set at release time with
// -ldflags "-X github.com/redbite/leasewrap/command.buildVersion=1.2.3".
var buildVersion string

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print leasewrap's version",
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return printed(fmt.Fprintf(c.App.Writer, "leasewrap %s\n", version()))
		},
	}
}
