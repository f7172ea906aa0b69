package command

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redbite/leasewrap/command/cmdutil"
)

// The binary carries the IANA zone database (time/tzdata): --timezone must
// work in a scratch image, where no copy of it exists.
func TestBinaryCarriesZoneData(t *testing.T) {
	out, err := exec.Command("go", "tool", "nm", binary).Output()
	if err != nil {
		t.Fatalf("go tool nm %s: %v", binary, err)
	}
	if !bytes.Contains(out, []byte(" time/tzdata.")) {
		t.Error("the binary does not link time/tzdata: --timezone fails on hosts without a zone database")
	}
}

// systemZoneDirs are where the time package looks for the system's zone
// database on Unix (platformZoneSources in its zoneinfo_unix.go).
var systemZoneDirs = []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo"}

// A host without a zone database, as a scratch image is: the system's
// directories are hidden under empty ones in a mount namespace of the
// binary's own, and ZONEINFO and GOROOT (whose lib/time/zoneinfo.zip a
// binary built without -trimpath reads) name an empty directory. A
// schedule in Europe/Berlin is still accepted: the run gets as far as the
// database, which is not there (69), instead of refusing the zone (64).
func TestTimezoneWithoutZoneDatabase(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	var hide []string
	for _, dir := range systemZoneDirs {
		if _, err := os.Stat(dir); err == nil {
			hide = append(hide, dir)
		}
	}
	// mount --bind EMPTY DIR for each DIR, then the command: a new user
	// namespace lets an unprivileged user mount in its own mount namespace,
	// and nothing mounted there is seen outside it.
	const script = `empty=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do mount --bind "$empty" "$1" || exit 99; shift; n=$((n-1)); done
exec "$@"`
	wrap := func(command ...string) *exec.Cmd {
		if len(hide) == 0 {
			return exec.Command(command[0], command[1:]...)
		}
		args := append([]string{"--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", empty, strconv.Itoa(len(hide))}, hide...)
		return exec.Command("unshare", append(args, command...)...)
	}
	// The hiding works here, or the test cannot say anything.
	probe := wrap("sh", "-c", `for d; do [ -z "$(ls -A "$d")" ] || exit 1; done`, "sh")
	probe.Args = append(probe.Args, hide...)
	if out, err := probe.CombinedOutput(); err != nil {
		// CI runs as root with util-linux: there, a test that cannot run
		// has failed.
		report := t.Skipf
		if os.Getenv("CI") != "" {
			report = t.Fatalf
		}
		report("cannot hide the zone database %v from a process here (unshare: %v %s)", hide, err, out)
	}

	// --once: a crontab line exits 69 for a database out of reach, where
	// a scheduler would stand by for it.
	cmd := wrap(binary, "--job", "j", "--schedule", "0 2 * * *", "--timezone", "Europe/Berlin", "--once",
		"--database-url", "postgres://127.0.0.1:1/x?sslmode=disable", "--log-format", "json", "--", "true")
	cmd.Env = append(withoutEnv(os.Environ(), "TZ", "ZONEINFO", "GOROOT"), "ZONEINFO="+empty, "GOROOT="+empty,
		"GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != cmdutil.ExitUnavailable || strings.Contains(string(out), "time zone") {
		t.Errorf("exit %v, want %d (lease store unavailable) and no word of the zone:\n%s", err, cmdutil.ExitUnavailable, out)
	}
}

// withoutEnv is env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	var kept []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			kept = append(kept, kv)
		}
	}
	return kept
}
