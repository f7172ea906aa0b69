package main

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

// admin is what the subcommands that read or change the tables work with.
type admin struct {
	opts  storeOptions
	log   zerolog.Logger
	db    *database
	store *lease.Store
}

// openAdmin reads the store settings of a subcommand and opens the store.
// The caller closes a.db.
func openAdmin(c *cli.Context) (*admin, error) {
	if err := noArgs(c); err != nil {
		return nil, err
	}
	opts, err := parseStoreOptions(newSettings(c))
	if err != nil {
		return nil, err
	}
	redact := newRedactor(opts.databaseURL)
	a := &admin{opts: opts, log: newLogger(opts, redact)}
	if a.db, err = openDatabase(c.Context, opts.databaseURL, redact, a.log); err != nil {
		return nil, err
	}
	if a.store, err = lease.New(a.db.pool, lease.WithTable(opts.table), lease.WithLogger(a.db.storeLogger(a.log))); err != nil {
		a.db.close()
		return nil, usagef("%v", err)
	}
	return a, nil
}

// printed turns a failed write of a subcommand's output into EX_IOERR.
func printed(_ int, err error) error {
	if err != nil {
		return &exitError{code: exitIOErr, err: fmt.Errorf("cannot write output: %w", err)}
	}
	return nil
}
