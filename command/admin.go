package command

import (
	"fmt"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/lease/inspect"
)

// admin is what the subcommands that read or change the tables work with.
type Admin struct {
	Opts StoreOptions
	Log  zerolog.Logger
	DB   *Database
	// read answers the read-only questions; it never creates, alters or
	// migrates anything, so status, history, check and the exporter open
	// no Store at all.
	Read *inspect.Reader
}

// openAdmin reads the store settings of a subcommand and opens the reader.
// The caller closes a.db.
func OpenAdmin(c *cli.Context) (*Admin, error) {
	if err := NoArgs(c); err != nil {
		return nil, err
	}
	opts, err := ParseStoreOptions(NewSettings(c))
	if err != nil {
		return nil, err
	}
	redact := NewRedactor(opts.DatabaseURL)
	a := &Admin{Opts: opts, Log: NewLogger(opts, redact)}
	if a.DB, err = OpenDatabase(c.Context, opts.DatabaseURL, redact, a.Log); err != nil {
		return nil, err
	}
	if a.Read, err = inspect.Open(a.DB.Pool, opts.Table); err != nil {
		a.DB.Close()
		return nil, Usagef("%v", err)
	}
	return a, nil
}

// store opens the lease store, for the commands that change the tables:
// migrate, and release once its look-up found what to release.
func (a *Admin) Store() (*lease.Store, error) {
	s, err := lease.New(a.DB.Pool, lease.WithTable(a.Opts.Table), lease.WithLogger(a.DB.StoreLogger(a.Log)))
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return s, nil
}

// printed turns a failed write of a subcommand's output into EX_IOERR.
func Printed(_ int, err error) error {
	if err != nil {
		return &ExitError{Code: ExitIOErr, Err: fmt.Errorf("cannot write output: %w", err)}
	}
	return nil
}
