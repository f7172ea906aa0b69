package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/redbite/leasewrap/internal/escape"
	"github.com/redbite/leasewrap/internal/pgtest"
)

// Characters a terminal acts on or hides: ESC (a screen clear), CR, BEL,
// the 8-bit CSI U+009B and the right-to-left override U+202E.
const terminalControls = "\x1b\r\x07\u009b\u202e"

// Rows written by hand (or by an older version) may hold any name. Every
// output prints them safely: JSON that decodes to the exact name but shows
// no control character raw, and /metrics that parses, with the label
// escaped as the text outputs escape it.
func TestOutputsEscapeHostileNamesFromTheTable(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const job, holder = "ev\x1b[2Jil\r\u009b1\u202ex", "h\x1b]0;pwn\x07\u202e"
	d.runJob(t, "plain", 0)
	d.exec(t, "UPDATE TABLE SET holder = $1, expires_at = now() + interval '1 hour', released_at = NULL", holder)
	skip := lw(t, nil, d.args("--job", "plain", "--", "true")...)
	if got := skip.Wait(t, 15*time.Second); got != 0 {
		t.Fatalf("skip exited %d", got)
	}
	if e := skip.WaitLog(t, "skipped: lease held by another instance"); e["current_holder"] != holder {
		t.Errorf("the log names the holder %q, want %q exactly", e["current_holder"], holder)
	}
	if logs := skip.Logs.String(); strings.ContainsAny(logs, terminalControls) {
		t.Errorf("a JSON log line prints a control character raw: %q", logs)
	}
	d.exec(t, "UPDATE TABLE SET job_name = $1", job)
	d.exec(t, "UPDATE "+pgx.Identifier{d.table + "_history"}.Sanitize()+" SET job_name = $1, holder = $2", job, holder)

	for _, args := range [][]string{
		{"status", "--json"},
		{"history", "--json"},
		{"check", "--job", job, "--max-age", "1h", "--json"},
	} {
		code, out, errOut := runInProcess(t, nil, append(args, "--database-url", pgtest.URL(), "--table", d.table)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, errOut)
		}
		if strings.ContainsAny(out, terminalControls) {
			t.Errorf("%s --json prints a control character raw: %q", args[0], out)
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s --json is not JSON (%v): %s", args[0], err, out)
		}
		if got := stringValues(v); !contains(got, job) {
			t.Errorf("%s --json: no string is the exact job name among %q", args[0], got)
		}
		if args[0] != "check" && !contains(stringValues(v), holder) {
			t.Errorf("%s --json: no string is the exact holder id", args[0])
		}
	}

	_, addr := d.exporter(t, pgtest.URL())
	_, body := get(t, addr, "/metrics")
	if strings.ContainsAny(body, terminalControls) {
		t.Errorf("/metrics prints a control character raw:\n%s", body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	labels := map[string]string{}
	for _, m := range families["leasewrap_job_holder_info"].GetMetric() {
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
	}
	if labels["lease"] != escape.Printable(job) || labels["holder"] != escape.Printable(holder) {
		t.Errorf("holder_info labels %q, want lease %q and holder %q", labels, escape.Printable(job), escape.Printable(holder))
	}
}

// The escapes keep names apart: a name that contains a control character
// and one written with its escape print differently.
func TestPrintableIsOneToOne(t *testing.T) {
	for _, pair := range [][2]string{{"x\x1b", `x\x1b`}, {"a\xffb", "a\ufffdb"}, {"r\u202e", `r\u202e`}} {
		if a, b := escape.Printable(pair[0]), escape.Printable(pair[1]); a == b {
			t.Errorf("%q and %q both print as %q", pair[0], pair[1], a)
		}
	}
	var buf bytes.Buffer
	if err := escape.JSON(&buf, []string{"\u009b\U000E0001"}); err != nil || buf.String() != "[\n  \"\\u009b\\udb40\\udc01\"\n]\n" {
		t.Errorf("escape.JSON wrote %q (%v)", buf.String(), err)
	}
}
