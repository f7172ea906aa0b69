package schedule

import (
	"os"
	"strings"
	"time"
)

// HostZone is the zone cron on this host reads its crontab lines in:
// CRON_TZ when the crontab sets it (cron passes it to the command), else
// TZ, else the system's zone (/etc/localtime). getenv reads the
// environment (os.Getenv). Name is the zone's IANA name when one can be
// found ("" otherwise), and UTC reports that the zone is UTC now and has
// no transition ahead, so that it reads a crontab line as UTC does.
func HostZone(getenv func(string) string, now time.Time) (name string, utc bool) {
	loc := time.Local
	for _, v := range []string{"CRON_TZ", "TZ"} {
		tz := strings.TrimPrefix(strings.TrimSpace(getenv(v)), ":")
		if tz == "" {
			continue
		}
		if l, err := time.LoadLocation(zoneName(tz)); err == nil {
			return zoneName(tz), isUTC(l, now)
		}
		if v == "TZ" && strings.HasPrefix(tz, "/") {
			// A file of zone data, which time.Local was read from.
			name = zoneName(tz)
			if name == tz {
				name = ""
				if tz == "/etc/localtime" {
					name = systemZone()
				}
			}
			return name, isUTC(loc, now)
		}
	}
	return systemZone(), isUTC(loc, now)
}

// isUTC reports whether loc has offset 0 at now and no transition after it.
func isUTC(loc *time.Location, now time.Time) bool {
	t := now.In(loc)
	_, off := t.Zone()
	_, end := t.ZoneBounds()
	return off == 0 && end.IsZero()
}

// zoneName is the IANA name in a zone file's path
// (/usr/share/zoneinfo/Europe/Berlin), or name itself.
func zoneName(name string) string {
	if i := strings.LastIndex(name, "zoneinfo/"); i >= 0 {
		return name[i+len("zoneinfo/"):]
	}
	return name
}

// systemZone is the name of the system's zone: the file /etc/localtime
// links to, or /etc/timezone's content (Debian), or "".
func systemZone() string {
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if name := zoneName(target); name != target {
			return name
		}
	}
	if b, err := os.ReadFile("/etc/timezone"); err == nil {
		if name := strings.TrimSpace(string(b)); name != "" && !strings.ContainsAny(name, " \n") {
			return name
		}
	}
	return ""
}
