package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:         "migrate",
		Usage:        "create or upgrade the lease table, its history and claims tables and the leasewrap_check function, print what was done, and exit",
		Flags:        storeFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			a, err := openAdmin(c)
			if err != nil {
				return err
			}
			defer a.db.close()
			store, err := a.store()
			if err != nil {
				return err
			}
			changes, err := store.Migrate(c.Context)
			switch {
			// The lease table is ready; the run history is not, and says why.
			case errors.Is(err, lease.ErrHistoryUnavailable):
				for _, line := range changes {
					if err := printed(fmt.Fprintln(c.App.Writer, line)); err != nil {
						return err
					}
				}
				return &exitError{code: exitUnavailable, err: a.db.redact.wrap(err)}
			case err != nil:
				return a.db.unavailable(err, a.log)
			}
			// Each change is said once, on stdout; where it was made, which
			// stdout does not say, once on stderr.
			a.db.named(a.log.Info()).Str("table", store.Table()).Int("changes", len(changes)).Msg("lease tables migrated")
			if len(changes) == 0 {
				changes = []string{"lease table " + store.Table() + " is up to date"}
			}
			for _, line := range changes {
				if err := printed(fmt.Fprintln(c.App.Writer, line)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
