package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cron runs lines with PATH=/usr/bin:/bin: every command must be named by
// its full path, and a system crontab (/etc/cron.d) needs a user field.
// Every line names its host with --id, as the README and docs/cron.md say.
func TestCrontabLinesWorkAsWritten(t *testing.T) {
	for file, userField := range map[string]bool{"crontab": false, "cron.d": true} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		jobs := 0
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || regexp.MustCompile(`^[A-Z_]+=`).MatchString(line) {
				continue
			}
			fields := strings.Fields(line)
			cmd := 5
			if userField {
				if len(fields) < 7 || !regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`).MatchString(fields[5]) {
					t.Errorf("%s: %q lacks a user field after the schedule", file, line)
					continue
				}
				cmd = 6
			}
			if len(fields) <= cmd || !strings.HasPrefix(fields[cmd], "/") || !strings.HasSuffix(fields[cmd], "/leasewrap") {
				t.Errorf("%s: %q does not run leasewrap by its full path", file, line)
				continue
			}
			if !strings.Contains(line, ` --id "$(hostname)" `) {
				t.Errorf("%s: %q lacks --id \"$(hostname)\": each run would get a new random holder id", file, line)
			}
			dash := strings.Index(line, " -- ")
			if dash < 0 || !strings.HasPrefix(strings.Fields(line[dash+4:])[0], "/") {
				t.Errorf("%s: %q does not name the job's command by its full path after --", file, line)
			}
			jobs++
		}
		if jobs == 0 {
			t.Errorf("%s has no job lines", file)
		}
	}
}
