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

// TestSystemdUnitVerifies runs systemd-analyze verify on examples/
// leasewrap@.service with ExecStart pointed at a freshly built leasewrap, and
// wants it silent: no error and no warning (unknown keys, bad values). It does
// not need systemd running as PID 1.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze")
	dir := t.TempDir()
	bin, err := lwtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	unit := repoFile(t, "examples/leasewrap@.service")

	verify := func(unit string) (string, error) {
		path := filepath.Join(dir, "leasewrap@.service")
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
		return string(bytes.TrimSpace(out)), err
	}

	// The check has teeth: a missing binary is reported.
	if out, err := verify(replaceAll(t, unit, "/usr/local/bin/leasewrap", filepath.Join(dir, "missing"))); err == nil || !strings.Contains(out, "not executable") {
		t.Fatalf("systemd-analyze verify accepted a missing ExecStart binary (err %v):\n%s", err, out)
	}
	if out, err := verify(replaceAll(t, unit, "/usr/local/bin/leasewrap", bin)); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify examples/leasewrap@.service: err %v\n%s", err, out)
	}
}
