package version

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/urfave/cli/v2"
)

// buildVersion is set at release time with
// -ldflags "-X github.com/redbite/leasewrap/command/version.buildVersion=1.2.3".
var buildVersion string

// String is leasewrap's version: the release's, else what Go recorded of
// the build (see fromBuildInfo).
func String() string {
	if buildVersion != "" {
		return buildVersion
	}
	info, _ := debug.ReadBuildInfo()
	return fromBuildInfo(info)
}

// fromBuildInfo is the version of a build without a release's: the
// module's version when Go knows it, else the commit it was built from, as
// in "devel+5eb13ac (2026-12-07T17:30:00Z, modified)", else "(devel)".
func fromBuildInfo(info *debug.BuildInfo) string {
	const devel = "(devel)"
	if info == nil {
		return devel
	}
	if v := info.Main.Version; v != "" && v != devel {
		return v
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	revision := vcs["vcs.revision"]
	if revision == "" {
		return devel
	}
	var about []string
	if t := vcs["vcs.time"]; t != "" {
		about = append(about, t)
	}
	if vcs["vcs.modified"] == "true" {
		about = append(about, "modified")
	}
	v := "devel+" + revision[:min(len(revision), 7)]
	if len(about) > 0 {
		v += " (" + strings.Join(about, ", ") + ")"
	}
	return v
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
