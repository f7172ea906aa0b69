package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:         "migrate",
		Usage:        "create or upgrade the lease table, print what was done, and exit",
		Flags:        storeFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("migrate takes no arguments, got %q", c.Args().First())
			}
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			if _, err := lease.ParseTable(c.String("table")); err != nil {
				return usagef("invalid --table: %v", err)
			}
			pool, err := connect(c)
			if err != nil {
				return err
			}
			defer closePool(pool)
			store, err := lease.New(pool, lease.WithTable(c.String("table")), lease.WithLogger(log))
			if err != nil {
				return usagef("%v", err)
			}
			changes, err := store.Migrate(c.Context)
			if err != nil {
				return unavailable(err, pool, log)
			}
			if len(changes) == 0 {
				changes = []string{"lease table " + store.Table() + " is up to date"}
			}
			for _, line := range changes {
				fmt.Fprintln(c.App.Writer, line)
			}
			return nil
		},
	}
}
