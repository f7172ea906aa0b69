package migrate

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/lease"
)

// Command is the migrate subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:         "migrate",
		Usage:        "create or upgrade the lease table, its history and claims tables and the leasewrap_check function, print what was done, and exit",
		Flags:        cmdutil.StoreFlags(),
		OnUsageError: cmdutil.UsageError,
		Action: func(c *cli.Context) error {
			a, err := cmdutil.OpenAdmin(c)
			if err != nil {
				return err
			}
			defer a.DB.Close()
			store, err := a.Store()
			if err != nil {
				return err
			}
			changes, err := store.Migrate(c.Context)
			switch {
			// The lease table is ready; the run history is not, and says why.
			case errors.Is(err, lease.ErrHistoryUnavailable):
				for _, line := range changes {
					if err := cmdutil.Printed(fmt.Fprintln(c.App.Writer, line)); err != nil {
						return err
					}
				}
				return &cmdutil.ExitError{Code: cmdutil.ExitUnavailable, Err: a.DB.Redact.Wrap(err)}
			case err != nil:
				return a.DB.Unavailable(err, a.Log)
			}
			// Each change is said once, on stdout; where it was made, which
			// stdout does not say, once on stderr.
			a.DB.Named(a.Log.Info()).Str("table", store.Table()).Int("changes", len(changes)).Msg("lease tables migrated")
			if len(changes) == 0 {
				changes = []string{"lease table " + store.Table() + " is up to date"}
			}
			for _, line := range changes {
				if err := cmdutil.Printed(fmt.Fprintln(c.App.Writer, line)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
