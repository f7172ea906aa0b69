package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// ErrInvalid matches, with errors.Is, every error of Parse and ParsePolicy,
// so that callers can tell bad input (exit 64) from anything else. The
// errors themselves read as one line naming the input and what is valid.
var ErrInvalid = errors.New("invalid schedule input")

type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &inputError{fmt.Sprintf(format, args...)}
}

// Schedule is a parsed spec. Its methods are safe for concurrent use.
type Schedule struct {
	spec     string         // canonical form
	every    time.Duration  // > 0 for "@every D"
	cron     cron.Schedule  // matches wall-clock times labelled UTC
	loc      *time.Location // zone the cron fields are read in
	zone     string         // canonical name of loc
	wildcard bool           // minute or hour field starts with "*"
	// zoneNamed says the zone was named (timezone, or a CRON_TZ= or TZ=
	// prefix), not UTC by default.
	zoneNamed bool
}

// validSyntax is appended to syntax errors so that one line says what would be valid.
const validSyntax = `valid: five fields "minute hour day-of-month month day-of-week", ` +
	`@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually or "@every D" (D at least 1s)`

// searchYears bounds the library's search for the next match; eight years
// separate some leap days (2096 to 2104).
const searchYears = 10

var parser = cron.MustNewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.DowOrDom).
	WithMaxSearchYears(searchYears)

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// utcNames are the spellings of UTC that all mean one zone, so that instances
// configured with any of them agree.
var utcNames = map[string]bool{
	"": true, "UTC": true, "Etc/UTC": true, "Etc/UCT": true, "UCT": true, "Zulu": true, "Etc/Zulu": true,
	"Universal": true, "Etc/Universal": true, "GMT": true, "Etc/GMT": true, "Etc/GMT0": true, "GMT0": true,
	"Etc/GMT+0": true, "Etc/GMT-0": true, "GMT+0": true, "GMT-0": true, "Etc/Greenwich": true, "Greenwich": true,
}

// Parse reads spec in the zone named by timezone (an IANA name such as
// "Europe/Berlin"; empty means UTC unless the spec says CRON_TZ= or TZ=).
// Errors match ErrInvalid and fit on one line.
func Parse(spec, timezone string) (*Schedule, error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return nil, invalid("schedule is empty; %s", validSyntax)
	}
	zone, fields, err := specZone(spec, fields, timezone)
	if err != nil {
		return nil, err
	}
	named := zone != ""
	loc, zone, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	var sched *Schedule
	if strings.EqualFold(fields[0], "@every") {
		sched, err = parseEvery(spec, fields)
	} else {
		sched, err = parseCron(spec, fields, loc, zone)
	}
	if err != nil {
		return nil, err
	}
	sched.zoneNamed = named
	return sched, nil
}

// specZone splits a CRON_TZ= or TZ= prefix off fields and reconciles it with
// the zone given separately.
func specZone(spec string, fields []string, timezone string) (string, []string, error) {
	timezone = strings.TrimSpace(timezone)
	name, ok := strings.CutPrefix(fields[0], "CRON_TZ=")
	if !ok {
		name, ok = strings.CutPrefix(fields[0], "TZ=")
	}
	if !ok {
		return timezone, fields, nil
	}
	if len(fields) == 1 {
		return "", nil, invalid("schedule %q has a time zone but no schedule after it; %s", spec, validSyntax)
	}
	if timezone != "" && canonicalZone(timezone) != canonicalZone(name) {
		return "", nil, invalid("schedule %q says time zone %q but the time zone given is %q; give the zone once, or the same zone in both", spec, name, timezone)
	}
	return name, fields[1:], nil
}

func canonicalZone(name string) string {
	if utcNames[name] {
		return "UTC"
	}
	return name
}

func loadZone(name string) (*time.Location, string, error) {
	name = canonicalZone(name)
	if name == "UTC" {
		return time.UTC, name, nil
	}
	if name == "Local" {
		return nil, "", invalid("time zone \"Local\" differs from host to host; name a zone such as \"Europe/Berlin\" or \"UTC\"")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, "", unknownZone(name)
	}
	return loc, name, nil
}

// zoneExamples are the zones an unknown zone's message offers, in order.
var zoneExamples = []string{"Europe/Berlin", "America/New_York"}

// unknownZone refuses name, offering as the example a zone that is not
// name: a message must not suggest the value it refuses.
func unknownZone(name string) error {
	example := zoneExamples[0]
	if example == name {
		example = zoneExamples[1]
	}
	return invalid("unknown time zone %q; valid: an IANA name such as %q, or \"UTC\"", name, example)
}

func parseEvery(spec string, fields []string) (*Schedule, error) {
	if len(fields) != 2 {
		return nil, invalid("schedule %q: @every takes one duration such as \"@every 2s\" or \"@every 1h30m\"", spec)
	}
	d, err := time.ParseDuration(fields[1])
	if err != nil || d < time.Second || d%time.Second != 0 {
		return nil, invalid("schedule %q: @every needs a duration of whole seconds, at least 1s, such as \"@every 2s\" or \"@every 90m\"", spec)
	}
	return &Schedule{spec: "@every " + d.String(), every: d, loc: time.UTC, zone: "UTC"}, nil
}

func parseCron(spec string, fields []string, loc *time.Location, zone string) (*Schedule, error) {
	if len(fields) == 1 && strings.HasPrefix(fields[0], "@") {
		expanded, ok := descriptors[strings.ToLower(fields[0])]
		if !ok {
			return nil, invalid("schedule %q: unknown descriptor %q; %s", spec, fields[0], validSyntax)
		}
		fields = strings.Fields(expanded)
	}
	if len(fields) != 5 {
		return nil, invalid("schedule %q has %d fields; %s", spec, len(fields), validSyntax)
	}
	// Quartz's L, W and # are not enabled in the parser: say so, rather
	// than pass on its words about options. No day or month name has an L.
	if strings.ContainsAny(fields[2], "LlWw") || strings.ContainsAny(fields[4], "#Ll") {
		return nil, invalid("schedule %q: L, W and # (last day, nearest weekday, nth weekday) are not supported; %s", spec, validSyntax)
	}
	canon := strings.ToLower(strings.Join(fields, " "))
	sched, err := parser.Parse(canon)
	if err != nil {
		return nil, invalid("schedule %q: %v; %s", spec, err, validSyntax)
	}
	if s, ok := sched.(*cron.SpecSchedule); ok {
		s.Location = time.UTC
	}
	if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, invalid("schedule %q names a day that never occurs (such as 30 February); %s", spec, validSyntax)
	}
	if zone != "UTC" {
		canon = "CRON_TZ=" + zone + " " + canon
	}
	return &Schedule{
		spec:     canon,
		cron:     sched,
		loc:      loc,
		zone:     zone,
		wildcard: strings.HasPrefix(fields[0], "*") || strings.HasPrefix(fields[1], "*"),
	}, nil
}

// Spec returns the canonical form of the schedule: descriptors expanded,
// fields lower-cased and separated by single spaces, the zone (if not UTC)
// as a CRON_TZ= prefix, and @every's duration as Go prints it, without a
// zone since it has none. Two instances agree on a job's schedule exactly
// when their Spec values are equal; specs that mean the same but are written
// differently ("0-59" for "*", US/Eastern for America/New_York) differ, which
// errs on the side of refusing.
func (s *Schedule) Spec() string { return s.spec }

// String returns Spec, so a Schedule prints as its canonical form.
func (s *Schedule) String() string { return s.spec }

// Location returns the zone the cron fields are read in (UTC for @every).
func (s *Schedule) Location() *time.Location { return s.loc }

// ZoneNamed reports whether Parse was given the zone (its timezone
// argument, or a CRON_TZ= or TZ= prefix), even as "UTC", rather than
// reading the spec in UTC by default.
func (s *Schedule) ZoneNamed() bool { return s.zoneNamed }

// Every returns D for "@every D", and 0 for a cron schedule.
func (s *Schedule) Every() time.Duration { return s.every }

// Next returns the first due time strictly after after, in the schedule's
// zone, or the zero time if there is none within ten years.
func (s *Schedule) Next(after time.Time) time.Time {
	if s.every > 0 {
		return s.nextEvery(after)
	}
	return s.nextCron(after)
}

// Between returns the due times in (from, to], oldest first, at most limit
// of them.
func (s *Schedule) Between(from, to time.Time, limit int) []time.Time {
	var out []time.Time
	for t := s.Next(from); len(out) < limit && !t.IsZero() && !t.After(to); t = s.Next(t) {
		out = append(out, t)
	}
	return out
}

var epoch = time.Unix(0, 0).UTC()

func (s *Schedule) nextEvery(after time.Time) time.Time {
	if after.Before(epoch) {
		return epoch.In(after.Location())
	}
	// In whole seconds, which cannot overflow for any year a caller can name.
	d := int64(s.every / time.Second)
	t := time.Unix(after.Unix()/d*d, 0)
	for !t.After(after) {
		t = t.Add(s.every)
	}
	return t.In(after.Location())
}

// maxSteps bounds nextCron's walk over zone periods and repeated-hour
// candidates; ten years hold about twenty transitions, a repeated hour at
// most sixty minutes.
const maxSteps = 10000

// nextCron walks forward through the periods in which the zone's offset is
// constant. Inside one period wall time and instant map one to one, so the
// library's match on wall time gives the instant; the transitions between
// periods are where the DST rules of the package doc apply.
func (s *Schedule) nextCron(after time.Time) time.Time {
	from, inclusive := after, false
	for range maxSteps {
		local := from.In(s.loc)
		start, end := local.ZoneBounds()
		off := offset(local)
		wall := from.UTC().Add(off)
		if inclusive {
			wall = wall.Add(-time.Nanosecond)
		}
		w := s.cron.Next(wall)
		if w.IsZero() {
			return time.Time{}
		}
		c := w.Add(-off)
		if end.IsZero() || c.Before(end) {
			if s.wildcard || !repeated(c, start, off, s.loc) {
				return c.In(after.Location())
			}
			from, inclusive = c, false
			continue
		}
		// The next match lies beyond this period. A fixed-time schedule
		// that names a wall time the spring-forward gap removes is due at
		// the first instant after the gap.
		gapEnd := end.UTC().Add(offset(end.In(s.loc)))
		if !s.wildcard && w.Before(gapEnd) {
			return end.In(after.Location())
		}
		from, inclusive = end, true
	}
	return time.Time{}
}

// repeated reports whether instant c, in the period starting at start with
// offset off, is the second occurrence of its wall time after a fall-back.
func repeated(c, start time.Time, off time.Duration, loc *time.Location) bool {
	if start.IsZero() {
		return false
	}
	prev := offset(start.Add(-time.Nanosecond).In(loc))
	return prev > off && c.Before(start.Add(prev-off))
}

func offset(t time.Time) time.Duration {
	_, off := t.Zone()
	return time.Duration(off) * time.Second
}

// NextOf is the next time after now of the schedule spec as a job's lease
// row records it (canonical, its zone included), and false for an empty
// spec or one this version cannot read.
func NextOf(spec string, now time.Time) (time.Time, bool) {
	if spec == "" {
		return time.Time{}, false
	}
	s, err := Parse(spec, "")
	if err != nil {
		return time.Time{}, false
	}
	next := s.Next(now)
	return next, !next.IsZero()
}
