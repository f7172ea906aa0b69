package command

import (
	"html"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// The exporter serves the web page next to /metrics, and its listener
// takes basic auth from --web.config.file as Prometheus exporters do
// (bcrypt hashes): every path answers 401 without the right credentials
// and 200 with them, and / and /jobs/NAME name the jobs.
func TestExporterServesTheWebPageBehindBasicAuth(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "nightly", 0)
	d.runJob(t, "broken", 3)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(config, []byte("basic_auth_users:\n  operator: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := lw(t, nil, "exporter", "--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json",
		"--http-addr", "127.0.0.1:0", "--web.config.file", config)
	addr := p.WaitLog(t, "serving the web page, /metrics and /healthz")["http_addr"].(string)

	fetch := func(path, user, password string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	pages := map[string][]string{
		"/":             {">nightly</a>", ">broken</a>"},
		"/jobs/nightly": {`<h1 class="job-name">nightly</h1>`, `data-outcome="succeeded"`},
		"/jobs/broken":  {`<h1 class="job-name">broken</h1>`, `data-outcome="failed"`},
		"/metrics":      {`leasewrap_job_last_exit_code{lease="broken"} 3`},
		"/healthz":      {"ok"},
	}
	for path, want := range pages {
		for _, cred := range [][2]string{{}, {"operator", "wrong"}, {"intruder", "s3cret pass"}} {
			if code, _ := fetch(path, cred[0], cred[1]); code != http.StatusUnauthorized {
				t.Errorf("%s with credentials %q answered %d, want 401", path, cred, code)
			}
		}
		code, body := fetch(path, "operator", "s3cret pass")
		if code != 200 {
			t.Errorf("%s with the right credentials answered %d, want 200", path, code)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s does not show %s", path, w)
			}
		}
	}
	if strings.Contains(p.Logs.String(), "s3cret") {
		t.Error("the password is in the exporter's log")
	}
}

// A web configuration the exporter cannot use stops it at the start, in
// one line naming the flag, with exit status 64.
func TestExporterRefusesABadWebConfig(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.runJob(t, "nightly", 0)
	config := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(config, []byte("basic_auth_users:\n  operator: not-a-bcrypt-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{config, filepath.Join(t.TempDir(), "missing.yml")} {
		p := lw(t, nil, "exporter", "--database-url", pgtest.URL(), "--table", d.table, "--http-addr", "127.0.0.1:0",
			"--web.config.file", file)
		if code := p.Wait(t, 15*time.Second); code != 64 || !strings.Contains(p.Logs.String(), "--web.config.file") {
			t.Errorf("exporter with web config %s exited %d, want 64 naming the flag: %s", file, code, p.Logs)
		}
	}
}

// The exporter's web page shows the output a run kept only when the
// operator starts it with --web.show-output (or LEASEWRAP_WEB_SHOW_OUTPUT):
// by default it says the run kept some, and how to read it.
func TestExporterHidesKeptOutputUnlessAskedTo(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	run := lw(t, nil, d.args("--job", "secretive", "--keep-output", "1KiB", "--", "sh", "-c", "echo token=s3cret")...)
	if code := run.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("the job exited %d: %s", code, run.Logs)
	}
	for _, env := range [][]string{nil, {"LEASEWRAP_WEB_SHOW_OUTPUT=true"}} {
		p := lw(t, env, "exporter", "--database-url", pgtest.URL(), "--table", d.table, "--log-format", "json", "--http-addr", "127.0.0.1:0")
		addr := p.WaitLog(t, "serving the web page, /metrics and /healthz")["http_addr"].(string)
		get := func(path string) string {
			t.Helper()
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return string(body)
		}
		page := get("/jobs/secretive")
		i := strings.Index(page, " bytes</a>")
		if i < 0 {
			t.Fatalf("the job page links to no kept output: %s", page)
		}
		href := page[strings.LastIndex(page[:i], `href="`)+len(`href="`):]
		href = html.UnescapeString(href[:strings.IndexByte(href, '#')])
		selected := get("/jobs/secretive" + href)
		shown := strings.Contains(selected, "token=s3cret")
		if want := env != nil; shown != want || !want && !strings.Contains(selected, "--web.show-output") {
			t.Errorf("with environment %q the selected run shows its output: %v, want %v: %s", env, shown, want, selected)
		}
	}
}
