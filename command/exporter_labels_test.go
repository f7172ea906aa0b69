package command

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// The exporter's labels carry a job's name, and who paused it and why,
// exactly as status prints them (escaped once: a'b"c\\d): a dashboard and
// a terminal name a job alike. The labels are read as Prometheus reads the
// text exposition, decoded.
func TestExporterLabelsNameJobsAsStatusPrintsThem(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const job, by, why = `a'b"c\d`, `ops\root`, `say "hi" \o/`
	d.runJob(t, job, 0)
	p := lw(t, nil, "pause", "--database-url", pgtest.URL(), "--table", d.table, "--job", job, "--id", by, "--reason", why)
	if code := p.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("pause exited %d: %s", code, p.Logs)
	}
	code, out := output(t, "status", "--database-url", pgtest.URL(), "--table", d.table)
	if code != 0 {
		t.Fatalf("status exited %d: %s", code, out)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 {
		t.Fatalf("status printed %q", out)
	}
	printed := strings.Fields(lines[1])[0] // the JOB column of the job's row
	// "NAME is paused by BY since …, until resumed: REASON"
	pause := lines[2]
	if printed != `a'b"c\\d` || !strings.HasPrefix(pause, printed+` is paused by ops\\root since `) ||
		!strings.HasSuffix(pause, `until resumed: say "hi" \\o/`) {
		t.Fatalf("status printed %q and %q", printed, pause)
	}

	_, addr := d.exporter(t, pgtest.URL())
	status, body := get(t, addr, "/metrics")
	if status != 200 {
		t.Fatalf("/metrics answered %d", status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not the text exposition: %v", err)
	}
	labels := func(family string) []map[string]string {
		var out []map[string]string
		for _, m := range families[family].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, l)
		}
		return out
	}
	for _, family := range []string{"leasewrap_job_state", "leasewrap_job_last_exit_code", "leasewrap_job_paused_info"} {
		series := labels(family)
		if len(series) == 0 {
			t.Errorf("/metrics has no %s", family)
		}
		for _, l := range series {
			if l["lease"] != printed {
				t.Errorf("%s's lease label decodes to %q; status prints %q", family, l["lease"], printed)
			}
		}
	}
	for _, l := range labels("leasewrap_job_paused_info") {
		if l["paused_by"] != `ops\\root` || l["reason"] != `say "hi" \\o/` {
			t.Errorf("leasewrap_job_paused_info's labels decode to paused_by %q, reason %q; status prints %q", l["paused_by"], l["reason"], pause)
		}
	}
}
