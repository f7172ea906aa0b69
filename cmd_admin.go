package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
	"github.com/redbite/leasewrap/runner"
)

// exitNotFound is the status of status and release when there is no such job
// or no live lease to release.
const exitNotFound = 1

// adminStore opens the lease store for the status, release and migrate
// subcommands. The caller closes the pool with closePool.
func adminStore(c *cli.Context) (*lease.Store, *pgxpool.Pool, zerolog.Logger, error) {
	if c.Args().Present() {
		return nil, nil, zerolog.Logger{}, usagef("%s takes no arguments, got %q", c.Command.Name, c.Args().First())
	}
	log, err := newLogger(c)
	if err != nil {
		return nil, nil, log, err
	}
	if _, err := lease.ParseTable(c.String("table")); err != nil {
		return nil, nil, log, usagef("invalid --table: %v", err)
	}
	pool, err := connect(c)
	if err != nil {
		return nil, nil, log, err
	}
	store, err := lease.New(pool, lease.WithTable(c.String("table")), lease.WithLogger(log))
	if err != nil {
		closePool(pool)
		return nil, nil, log, usagef("%v", err)
	}
	return store, pool, log, nil
}

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:         "migrate",
		Usage:        "create or upgrade the lease table and the leasewrap_check function, print what was done, and exit",
		Flags:        storeFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			store, pool, log, err := adminStore(c)
			if err != nil {
				return err
			}
			defer closePool(pool)
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

func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:      "release",
		Usage:     "hand back a live lease: this --id's, or any holder's with --force",
		UsageText: "leasewrap release --job NAME (--id ID | --force)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "job", EnvVars: []string{"LEASEWRAP_JOB"}, Usage: "lease name (required)"},
			&cli.StringFlag{Name: "id", EnvVars: []string{"LEASEWRAP_ID"}, Usage: "release only if this holder id has it"},
			&cli.BoolFlag{Name: "force", Usage: "release whoever holds it (for a host that died)"},
		}, storeFlags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			job, id := c.String("job"), c.String("id")
			if err := lease.CheckJob(job); err != nil {
				return usagef("invalid --job: %v", err)
			}
			if id == "" && !c.Bool("force") {
				return usagef("release needs --id (the holder id the lease was taken under) or --force (any holder)")
			}
			if c.Bool("force") {
				id = ""
			}
			store, pool, log, err := adminStore(c)
			if err != nil {
				return err
			}
			defer closePool(pool)
			holder, token, err := store.ReleaseHeld(c.Context, job, id)
			switch {
			case errors.Is(err, lease.ErrNoJob):
				log.Warn().Err(err).Str("job", job).Str("id", id).Msg("nothing to release")
				return &runner.ExitError{Code: exitNotFound}
			case err != nil:
				return unavailable(err, pool, log)
			}
			log.Info().Str("job", job).Str("holder", holder).Int64("fencing_token", token).
				Bool("force", c.Bool("force")).Msg("released")
			return nil
		},
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show leases and their last runs (exit 1 if --job has no lease row)",
		UsageText: "leasewrap status [--job NAME] [--json]",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "job", EnvVars: []string{"LEASEWRAP_JOB"}, Usage: "show only this job"},
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array for scripts"},
		}, storeFlags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			job := c.String("job")
			if job != "" {
				if err := lease.CheckJob(job); err != nil {
					return usagef("invalid --job: %v", err)
				}
			}
			store, pool, log, err := adminStore(c)
			if err != nil {
				return err
			}
			defer closePool(pool)
			jobs, err := store.Status(c.Context, job)
			switch {
			case errors.Is(err, lease.ErrNoJob) && job != "":
				fmt.Fprintf(c.App.ErrWriter, "leasewrap: %v\n", err)
				return &runner.ExitError{Code: exitNotFound}
			case errors.Is(err, lease.ErrNoJob):
				jobs = nil
			case err != nil:
				return unavailable(err, pool, log)
			}
			if c.Bool("json") {
				return printStatusJSON(c, jobs)
			}
			return printStatusTable(c, jobs)
		},
	}
}

// statusJSON is the stable JSON shape of one job in `status --json`.
type statusJSON struct {
	Job                 string     `json:"job"`
	Holder              string     `json:"holder"`
	State               string     `json:"state"`
	ExpiresInSeconds    *float64   `json:"expires_in_seconds"`
	FencingToken        int64      `json:"fencing_token"`
	LastStartedAt       *time.Time `json:"last_started_at"`
	LastFinishedAt      *time.Time `json:"last_finished_at"`
	LastDurationSeconds *float64   `json:"last_duration_seconds"`
	LastExitCode        *int       `json:"last_exit_code"`
	LastHolder          *string    `json:"last_holder"`
}

func printStatusJSON(c *cli.Context, jobs []lease.JobStatus) error {
	out := make([]statusJSON, 0, len(jobs))
	for _, j := range jobs {
		s := statusJSON{Job: j.Job, Holder: j.Holder, State: j.State, FencingToken: j.FencingToken,
			LastStartedAt: utc(j.LastStarted), LastFinishedAt: utc(j.LastFinished), LastExitCode: j.LastExitCode, LastHolder: j.LastHolder}
		if j.State == lease.StateHeld {
			s.ExpiresInSeconds = ptr(j.ExpiresIn.Round(time.Millisecond).Seconds())
		}
		if d, ok := lastDuration(j); ok {
			s.LastDurationSeconds = ptr(d.Seconds())
		}
		out = append(out, s)
	}
	enc := json.NewEncoder(c.App.Writer)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printStatusTable(c *cli.Context, jobs []lease.JobStatus) error {
	w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tHOLDER\tSTATE\tEXPIRES IN\tTOKEN\tLAST START\tDURATION\tEXIT\tBY")
	for _, j := range jobs {
		expires, start, duration, exit, by := "-", "-", "-", "-", "-"
		if j.State == lease.StateHeld {
			expires = j.ExpiresIn.Round(100 * time.Millisecond).String()
		}
		if j.LastStarted != nil {
			start = j.LastStarted.UTC().Format("2006-01-02 15:04:05Z")
		}
		if d, ok := lastDuration(j); ok {
			duration = d.String()
		} else if j.LastStarted != nil && j.State == lease.StateHeld {
			duration = "running"
		}
		if j.LastExitCode != nil {
			exit = strconv.Itoa(*j.LastExitCode)
		}
		if j.LastHolder != nil {
			by = *j.LastHolder
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.Job, j.Holder, j.State, expires, j.FencingToken, start, duration, exit, by)
	}
	return w.Flush()
}

// lastDuration is how long the last finished run took.
func lastDuration(j lease.JobStatus) (time.Duration, bool) {
	if j.LastStarted == nil || j.LastFinished == nil || j.LastFinished.Before(*j.LastStarted) {
		return 0, false
	}
	return j.LastFinished.Sub(*j.LastStarted).Round(time.Millisecond), true
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func ptr[T any](v T) *T { return &v }
