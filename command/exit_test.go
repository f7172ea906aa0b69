package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command/cmdutil"
	"github.com/redbite/leasewrap/internal/redact"
	"github.com/redbite/leasewrap/lease"
)

// An error an action returns without a status is a bug: EX_SOFTWARE,
// logged as an internal error in the format asked for (or, without log
// settings, said in one line), with the password redacted. urfave/cli's own
// errors, which come before any action, stay usage errors.
func TestInternalErrorExits70(t *testing.T) {
	const password = "s3cret-pw"
	dsn := "postgres://u:" + password + "@db/x"
	bug := cmdutil.WithStatus(func(*cli.Context) error { return fmt.Errorf("unexpected state for %s", dsn) })
	newApp := func(flags []cli.Flag, stderr io.Writer) *cli.App {
		return &cli.App{Name: "leasewrap", Writer: io.Discard, ErrWriter: stderr,
			ExitErrHandler: func(*cli.Context, error) {}, Flags: flags, Action: bug}
	}

	// With log settings: one JSON log line at error level, on the app's
	// stderr.
	var said, logged bytes.Buffer
	code := cmdutil.Report(&said, newApp(cmdutil.StoreFlags(), &logged).Run([]string{"leasewrap", "--database-url", dsn, "--log-format", "json"}))
	var entry map[string]any
	if err := json.Unmarshal(logged.Bytes(), &entry); err != nil || entry["level"] != "error" || entry["message"] != "internal error" ||
		!strings.Contains(fmt.Sprint(entry["error"]), "a bug in leasewrap") {
		t.Errorf("logged %q (%v), want one JSON line: internal error, at error level", logged.String(), err)
	}
	if code != cmdutil.ExitSoftware || said.Len() != 0 {
		t.Errorf("exit %d, said %q; want 70 and only the log line", code, said.String())
	}

	// Without: one line.
	said.Reset()
	code = cmdutil.Report(&said, newApp([]cli.Flag{&cli.StringFlag{Name: "database-url"}}, io.Discard).Run([]string{"leasewrap", "--database-url", dsn}))
	if code != cmdutil.ExitSoftware || !strings.Contains(said.String(), "internal error") || strings.Count(said.String(), "\n") != 1 {
		t.Errorf("exit %d, %q; want 70 and one line saying it is an internal error", code, said.String())
	}
	if strings.Contains(said.String()+logged.String(), password) {
		t.Errorf("the password is in %q or %q", said.String(), logged.String())
	}
	code, _, errOut := runInProcess(t, map[string]string{"LEASEWRAP_WAIT": "maybe"}, "--job", "j", "--", "true")
	if code != cmdutil.ExitUsage {
		t.Errorf("LEASEWRAP_WAIT=maybe: exit %d, %q; want a usage error", code, errOut)
	}
}

// A redacted error hides the password in its message and keeps the chain
// for errors.Is and errors.As.
func TestRedactedErrorKeepsTheChain(t *testing.T) {
	r := redact.New("postgres://u:pw-123@db/x")
	err := r.Wrap(fmt.Errorf("cannot read postgres://u:pw-123@db/x: %w", lease.ErrHistoryUnavailable))
	if strings.Contains(err.Error(), "pw-123") {
		t.Errorf("password in %q", err)
	}
	if !errors.Is(err, lease.ErrHistoryUnavailable) {
		t.Errorf("errors.Is(%v, ErrHistoryUnavailable) = false through the redactor", err)
	}
	wrapped := fmt.Errorf("history: %w", r.Wrap(context.DeadlineExceeded))
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false", wrapped)
	}
	if r.Wrap(nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}
