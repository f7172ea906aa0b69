package command

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
)

// admin is what the subcommands that read or change the tables work with.
type admin struct {
	opts storeOptions
	log  zerolog.Logger
	db   *database
	// read answers the read-only questions; it never creates, alters or
	// migrates anything, so status, history, check and the exporter open
	// no Store at all.
	read *inspect.Reader
}

// openAdmin reads the store settings of a subcommand and opens the reader.
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
	if a.read, err = inspect.Open(a.db.pool, opts.table); err != nil {
		a.db.close()
		return nil, usagef("%v", err)
	}
	return a, nil
}

// store opens the lease store, for the commands that change the tables:
// migrate, and release once its look-up found what to release.
func (a *admin) store() (*lease.Store, error) {
	s, err := lease.New(a.db.pool, lease.WithTable(a.opts.table), lease.WithLogger(a.db.storeLogger(a.log)))
	if err != nil {
		return nil, usagef("%v", err)
	}
	return s, nil
}

// printed turns a failed write of a subcommand's output into EX_IOERR.
func printed(_ int, err error) error {
	if err != nil {
		return &exitError{code: exitIOErr, err: fmt.Errorf("cannot write output: %w", err)}
	}
	return nil
}
