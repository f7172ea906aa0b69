// Command floor is the least a lease wrapper in Go can do: connect with pgx,
// take the lease in one INSERT ... ON CONFLICT, run the command, release it
// in one UPDATE, exit. `leasewrap --job x -- true` is measured against it.
//
//	floor DATABASE_URL JOB COMMAND [ARG...]
//
// It uses leasewrap's table (run `leasewrap migrate` first) and, like
// leasewrap, one round trip per statement (pgx's exec mode).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/jackc/pgx/v5"
)

const take = `INSERT INTO leader_lease AS l (job_name, holder, expires_at)
VALUES ($1::text, $2::text, now() + interval '45 seconds')
ON CONFLICT (job_name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE l.expires_at <= now()
RETURNING true`

const release = `UPDATE leader_lease SET expires_at = now() WHERE job_name = $1::text AND holder = $2::text`

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: floor DATABASE_URL JOB COMMAND [ARG...]")
		os.Exit(64)
	}
	os.Exit(run(os.Args[1], os.Args[2], os.Args[3:]))
}

func run(url, job string, command []string) int {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 64
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 69
	}
	defer conn.Close(ctx)
	holder := fmt.Sprintf("floor-%d", os.Getpid())
	var taken bool
	if err := conn.QueryRow(ctx, take, job, holder).Scan(&taken); errors.Is(err, pgx.ErrNoRows) {
		return 0 // held by another instance
	} else if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 69
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	status := 0
	if err := cmd.Run(); err != nil {
		status = 1
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			status = ee.ExitCode()
		}
	}
	if _, err := conn.Exec(ctx, release, job, holder); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return status
}
