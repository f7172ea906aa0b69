// Package schedule turns a job's schedule into the exact instants at which it
// is due, and decides after an outage which of those instants to run and which
// to record as missed.
//
// Everything here is a pure function of its arguments: no clock is read, no
// database is touched. Two instances that parse the same spec and zone get the
// same instants whatever their own clocks say or when they started, which is
// what lets each scheduled time be claimed once by a row keyed by
// (job, scheduled time).
//
// # Syntax
//
// A spec is one of
//
//   - the five cron fields "minute hour day-of-month month day-of-week"
//     (numbers, names such as jan or mon in any case, "*", ranges, lists and
//     steps; day-of-week 0 or 7 is Sunday; when both day fields are
//     restricted a day matching either one is due, as in Vixie cron);
//   - a descriptor: @hourly, @daily (or @midnight), @weekly, @monthly,
//     @yearly (or @annually);
//   - "@every D" with D a Go duration of whole seconds, at least 1s.
//
// A cron spec may start with "CRON_TZ=Zone " or "TZ=Zone ". The zone can also
// be given on its own (the --timezone flag); giving both with different zones
// is an error. Without either, cron specs are read in UTC, never in the host's
// local zone, so that every host agrees.
//
// # Library
//
// The cron fields are parsed and matched by github.com/netresearch/go-cron,
// the maintained fork of github.com/robfig/cron/v3. robfig/cron has had no
// release since v3.0.1 (2020) and carries open bugs that matter here: jobs in
// the hour skipped by a spring-forward transition are silently dropped
// (robfig/cron#541), and a "TZ=" spec with nothing after it panics
// (robfig/cron#554, #555). The fork fixes both, is released regularly, keeps
// the robfig parser that most Go schedulers share (so operators' specs mean
// what they meant elsewhere) and has a fuzzed parser. gronx was considered and
// rejected: its NextTickAfter spun or returned wrong weekdays across
// fall-back transitions until 2026 (adhocore/gronx#50, #68, #74).
// hashicorp/cronexpr (Nomad's fork) runs a repeated hour's jobs twice by
// design (hashicorp/nomad#7894).
//
// Three things found in the fork v0.9.1 shape how it is used:
//
//   - Since v0.9.0 both restricted day fields must match (AND); standard
//     cron, and robfig/cron, use OR. The DowOrDom option restores OR.
//   - Any field containing an upper-case H is taken for a Jenkins hash
//     expression, so "0 0 * * THU" is refused; fields are lower-cased first.
//   - Its own DST handling, asked in the schedule's zone, gets three of this
//     package's DST tests wrong: a time in a spring-forward gap moves to the
//     same minute of the next hour (02:30 runs at 03:30, not at 03:00 as its
//     documentation says), a fixed time in a repeated hour runs in both
//     occurrences, and @daily skips the day where midnight does not exist
//     (Asia/Beirut, 29 March 2026). So the library only ever matches fields
//     on wall-clock times labelled UTC, which have no transitions, and this
//     package maps wall times to instants itself, with the rules below.
//
// "@every D" is not left to the library either: its Every counts from the
// instant it is asked, so two instances started at different times would
// disagree. Here the due times are the Unix epoch plus k·D.
//
// # Daylight saving time
//
// A fixed-time schedule (minute and hour fields both not starting with "*",
// which includes @daily, @weekly, @monthly, @yearly) never loses and never
// doubles a named time, as ISC cron does:
//
//   - spring forward: a wall time that does not exist that day (02:30 in
//     Europe/Berlin on the last Sunday of March) is due once, at the first
//     instant after the gap (03:00 CEST); several named times in one gap are
//     due once together.
//   - fall back: a wall time that occurs twice (02:30 in Europe/Berlin, 01:30
//     in America/New_York on the last transition of the year) is due once, at
//     its first occurrence.
//
// A schedule whose minute or hour field starts with "*" (@hourly, "*/5 * * * *")
// follows the clock on the wall as it goes, as ISC cron does for such jobs:
// its times in a spring-forward gap do not exist and are not due, and its
// times in a repeated hour are due in both occurrences, so "every 15 minutes"
// keeps its rhythm in real time.
//
// "@every D" is absolute and ignores zones and DST.
package schedule
