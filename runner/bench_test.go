package runner_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/runner"
)

// BenchmarkRunTrue is the runner's share of a wrapped `true`: start it in
// its own process group, wait for it, check the group is gone.
func BenchmarkRunTrue(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1)")
	}
	l := newFakeLease(time.Hour)
	for b.Loop() {
		if res := supervisor.Run(exec.Command(path), l, runner.Config{Log: zerolog.Nop()}); res.Status != 0 {
			b.Fatalf("true exited %d", res.Status)
		}
	}
}
