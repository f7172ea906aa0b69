package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/lease"
)

// An error an action returns without a status is a bug: EX_SOFTWARE, said
// in one line, with the password redacted. urfave/cli's own errors, which
// come before any action, stay usage errors.
func TestInternalErrorExits70(t *testing.T) {
	const password = "s3cret-pw"
	app := &cli.App{Name: "leasewrap", Writer: io.Discard, ErrWriter: io.Discard,
		ExitErrHandler: func(*cli.Context, error) {},
		Flags:          []cli.Flag{&cli.StringFlag{Name: "database-url"}},
		Action: withStatus(func(*cli.Context) error {
			return fmt.Errorf("unexpected state for postgres://u:%s@db/x", password)
		})}
	var stderr bytes.Buffer
	code := report(&stderr, app.Run([]string{"leasewrap", "--database-url", "postgres://u:" + password + "@db/x"}))
	if code != exitSoftware || !strings.Contains(stderr.String(), "internal error") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, %q; want 70 and one line saying it is an internal error", code, stderr.String())
	}
	if strings.Contains(stderr.String(), password) {
		t.Errorf("the password is in %q", stderr.String())
	}
	code, _, errOut := runInProcess(t, map[string]string{"LEASEWRAP_WAIT": "maybe"}, "--job", "j", "--", "true")
	if code != exitUsage {
		t.Errorf("LEASEWRAP_WAIT=maybe: exit %d, %q; want a usage error", code, errOut)
	}
}

// A redacted error hides the password in its message and keeps the chain
// for errors.Is and errors.As.
func TestRedactedErrorKeepsTheChain(t *testing.T) {
	r := newRedactor("postgres://u:pw-123@db/x")
	err := r.wrap(fmt.Errorf("cannot read postgres://u:pw-123@db/x: %w", lease.ErrHistoryUnavailable))
	if strings.Contains(err.Error(), "pw-123") {
		t.Errorf("password in %q", err)
	}
	if !errors.Is(err, lease.ErrHistoryUnavailable) {
		t.Errorf("errors.Is(%v, ErrHistoryUnavailable) = false through the redactor", err)
	}
	wrapped := fmt.Errorf("history: %w", r.wrap(context.DeadlineExceeded))
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false", wrapped)
	}
	if r.wrap(nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}
