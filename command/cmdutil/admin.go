package cmdutil

import (
	"fmt"
	"os"
	"os/user"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/inspect"
	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/lease"
)

// Admin is what the subcommands that read or change the tables work with.
type Admin struct {
	Opts StoreOptions
	Log  zerolog.Logger
	DB   *Database
	// Read answers the read-only questions; it never creates, alters or
	// migrates anything, so status, history, check and the exporter open
	// no Store at all.
	Read *inspect.Reader
}

// OpenAdmin reads the store settings of a subcommand and opens the reader.
// The caller closes a.DB.
func OpenAdmin(c *cli.Context) (*Admin, error) {
	if err := NoArgs(c); err != nil {
		return nil, err
	}
	opts, err := ParseStoreOptions(NewSettings(c))
	if err != nil {
		return nil, err
	}
	secrets := redact.New(opts.DatabaseURL)
	a := &Admin{Opts: opts, Log: NewLogger(c.App.ErrWriter, opts, secrets)}
	if a.DB, err = OpenDatabase(c.Context, opts.DatabaseURL, secrets, a.Log); err != nil {
		return nil, err
	}
	if a.Read, err = inspect.Open(a.DB.Pool, opts.Table); err != nil {
		a.DB.Close()
		return nil, Usagef("%v", err)
	}
	return a, nil
}

// Store opens the lease store, for the commands that change the tables:
// migrate, and release once its look-up found what to release.
func (a *Admin) Store() (*lease.Store, error) {
	s, err := lease.New(a.DB.Pool, lease.WithTable(a.Opts.Table), lease.WithLogger(a.DB.StoreLogger(a.Log)))
	if err != nil {
		return nil, Usagef("%v", err)
	}
	return s, nil
}

// Printed turns a failed write of a subcommand's output into EX_IOERR.
func Printed(_ int, err error) error {
	if err != nil {
		return &ExitError{Code: ExitIOErr, Err: fmt.Errorf("cannot write output: %w", err)}
	}
	return nil
}

// OperatorStore opens the database and a Store acting as who (--id when
// given), for an operator's command that writes.
func OperatorStore(c *cli.Context, s Settings, who string) (*lease.Store, *Admin, error) {
	id, err := ParseHolder(s, "id")
	if err != nil {
		return nil, nil, err
	}
	if id != "" {
		who = id
	}
	a, err := OpenAdmin(c)
	if err != nil {
		return nil, nil, err
	}
	store, err := lease.New(a.DB.Pool, lease.WithTable(a.Opts.Table), lease.WithHolder(who), lease.WithLogger(a.DB.StoreLogger(a.Log)))
	if err != nil {
		a.DB.Close()
		return nil, nil, Usagef("%v", err)
	}
	return store, a, nil
}

// Operator is who acts in an operator's command (pause, resume, release):
// the operator's user name at this host.
func Operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
}
