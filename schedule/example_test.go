package schedule_test

import (
	"fmt"
	"time"

	"github.com/redbite/leasewrap/schedule"
)

// A job at 02:30 Berlin time meets the spring-forward gap: that day it is due
// at 03:00, the first instant after the gap.
func Example() {
	s, err := schedule.Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	from := time.Date(2026, 3, 28, 12, 0, 0, 0, s.Location())
	for _, t := range s.Between(from, from.Add(48*time.Hour), 10) {
		fmt.Println(t.In(s.Location()).Format(time.RFC3339))
	}
	fmt.Println(s.Spec())
	// Output:
	// 2026-03-29T03:00:00+02:00
	// 2026-03-30T02:30:00+02:00
	// CRON_TZ=Europe/Berlin 30 2 * * *
}

// After ten missed times of "@every 2s", policy latest runs the most recent
// one and records the other nine as missed.
func ExampleSchedule_Plan() {
	s, _ := schedule.Parse("@every 2s", "")
	last := time.Unix(1_800_000_000, 0)
	now := last.Add(21500 * time.Millisecond)
	p := s.Plan(last, now, schedule.CatchUp{Policy: schedule.CatchUpLatest})
	fmt.Println(len(p.Run), p.Run[0].Sub(last), len(p.Missed), p.Collapsed.Count)
	// Output: 1 20s 9 0
}
