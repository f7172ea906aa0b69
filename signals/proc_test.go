package signals_test

import (
	"slices"
	"testing"

	"github.com/redbite/leasewrap/signals"
)

func TestDescendantsWalksTheTreeAndSkipsSubtrees(t *testing.T) {
	// 1 ── 10 ┬─ 11 ── 12
	//         ├─ 13 ── 14   (13 skipped: 14 goes with it)
	//         └─ 15
	// 1 ── 20               (not below 10)
	procs := []signals.Process{
		{Pid: 10, PPid: 1}, {Pid: 11, PPid: 10}, {Pid: 12, PPid: 11},
		{Pid: 13, PPid: 10}, {Pid: 14, PPid: 13}, {Pid: 15, PPid: 10, Zombie: true},
		{Pid: 20, PPid: 1},
	}
	pids := func(ps []signals.Process) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.Pid)
		}
		slices.Sort(out)
		return out
	}
	if got, want := pids(signals.Descendants(procs, 10, nil)), []int{11, 12, 13, 14, 15}; !slices.Equal(got, want) {
		t.Errorf("descendants of 10: %v, want %v", got, want)
	}
	skip13 := func(p signals.Process) bool { return p.Pid == 13 }
	if got, want := pids(signals.Descendants(procs, 10, skip13)), []int{11, 12, 15}; !slices.Equal(got, want) {
		t.Errorf("descendants of 10 without 13: %v, want %v", got, want)
	}
	if got := signals.Descendants(procs, 12, nil); len(got) != 0 {
		t.Errorf("descendants of a leaf: %v, want none", got)
	}
	// A table read while it changed can hold a loop; the walk still ends.
	loop := []signals.Process{{Pid: 2, PPid: 3}, {Pid: 3, PPid: 2}}
	if got, want := pids(signals.Descendants(loop, 2, nil)), []int{3}; !slices.Equal(got, want) {
		t.Errorf("descendants in a loop: %v, want %v", got, want)
	}
}
