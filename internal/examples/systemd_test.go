//go:build linux

package examples

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redbite/leasewrap/internal/lwtest"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on each systemd unit
// of examples/ (leasewrap@.service, leasewrap-schedule.service) with
// ExecStart pointed at a freshly built leasewrap, and wants it silent: no
// error and no warning (unknown keys, bad values), and an [Install]
// section, without which systemctl enable refuses the unit. It does not
// need systemd running as PID 1.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze")
	dir := t.TempDir()
	bin, err := lwtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"leasewrap@.service", "leasewrap-schedule.service"} {
		unit := repoFile(t, "examples/"+name)
		// systemctl enable refuses a unit without an [Install] section.
		if !strings.Contains(unit, "\n[Install]\nWantedBy=") {
			t.Errorf("examples/%s has no [Install] section with WantedBy=: systemctl enable would refuse it", name)
		}
		verify := func(unit string) (string, error) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
			return string(bytes.TrimSpace(out)), err
		}
		// The check has teeth: a missing binary is reported.
		if out, err := verify(replaceAll(t, unit, "/usr/bin/leasewrap", filepath.Join(dir, "missing"))); err == nil || !strings.Contains(out, "not executable") {
			t.Fatalf("systemd-analyze verify accepted a missing ExecStart binary in %s (err %v):\n%s", name, err, out)
		}
		if out, err := verify(replaceAll(t, unit, "/usr/bin/leasewrap", bin)); err != nil || out != "" {
			t.Fatalf("systemd-analyze verify examples/%s: err %v\n%s", name, err, out)
		}
	}
}
