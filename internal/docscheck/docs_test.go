package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mentions reports whether text names word as a whole: not as the start
// of a longer flag, variable or metric name.
func mentions(text, word string) bool {
	re := regexp.MustCompile(regexp.QuoteMeta(word) + `($|[^A-Za-z0-9_.-])`)
	return re.MatchString(text)
}

var (
	helpFlag = regexp.MustCompile(`^\s+(--[a-z0-9][a-z0-9.-]*[a-z0-9])(\s|,|$)`)
	helpEnv  = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
)

// TestDocsNameEveryFlagAndVariable reads every testdata/help-*.txt (what
// `leasewrap --help` and `leasewrap SUB --help` print) and wants each flag
// and environment variable named in docs/configuration.md.
func TestDocsNameEveryFlagAndVariable(t *testing.T) {
	helps, err := filepath.Glob(filepath.Join(root, "testdata", "help-*.txt"))
	if err != nil || len(helps) < 2 {
		t.Fatalf("want testdata/help-*.txt golden files, found %d (%v)", len(helps), err)
	}
	config := read(t, "docs/configuration.md")
	missing := map[string][]string{}
	for _, help := range helps {
		b, err := os.ReadFile(help)
		if err != nil {
			t.Fatal(err)
		}
		cmd := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(help), "help-"), ".txt")
		for _, line := range strings.Split(string(b), "\n") {
			m := helpFlag.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			words := []string{m[1]}
			for _, env := range helpEnv.FindAllStringSubmatch(line, -1) {
				words = append(words, env[1])
			}
			for _, w := range words {
				if w != "--help" && !mentions(config, w) {
					missing[w] = append(missing[w], cmd)
				}
			}
		}
	}
	report(t, "docs/configuration.md does not name", missing)
}

// TestDocsNameEveryMetric wants every metric of the exporter
// (prometheus.NewDesc in monitor/exporter.go) in docs/monitoring.md, and
// every metric of --http-addr (the *Opts Name in monitor/monitor.go) in
// docs/standby.md.
func TestDocsNameEveryMetric(t *testing.T) {
	for _, c := range []struct{ source, pattern, doc string }{
		{"monitor/exporter.go", `prometheus\.NewDesc\("(leasewrap_[a-z0-9_]+)"`, "docs/monitoring.md"},
		{"monitor/monitor.go", `Opts\{Name:\s*"(leasewrap_[a-z0-9_]+)"`, "docs/standby.md"},
	} {
		src, doc := read(t, c.source), read(t, c.doc)
		found := regexp.MustCompile(c.pattern).FindAllStringSubmatch(src, -1)
		if len(found) == 0 {
			t.Errorf("no metric found in %s with %s: update the test", c.source, c.pattern)
		}
		missing := map[string][]string{}
		for _, m := range found {
			if !mentions(doc, m[1]) {
				missing[m[1]] = append(missing[m[1]], c.source)
			}
		}
		report(t, c.doc+" does not name", missing)
	}
}

// TestDocsReadmeNamesEverySubcommand wants each subcommand that
// `leasewrap --help` lists named in the README as `leasewrap SUB`.
func TestDocsReadmeNamesEverySubcommand(t *testing.T) {
	help, readme := read(t, "testdata/help-root.txt"), read(t, "README.md")
	_, after, ok := strings.Cut(help, "\nCOMMANDS:\n")
	if !ok {
		t.Fatal("testdata/help-root.txt has no COMMANDS: section: update the test")
	}
	missing := map[string][]string{}
	n := 0
	for _, line := range strings.Split(after, "\n") {
		if strings.TrimSpace(line) == "" {
			break
		}
		sub := strings.Fields(line)[0]
		n++
		if !mentions(readme, "leasewrap "+sub) {
			missing["leasewrap "+sub] = []string{"help-root.txt"}
		}
	}
	if n == 0 {
		t.Fatal("no subcommands read from testdata/help-root.txt: update the test")
	}
	report(t, "README.md does not name", missing)
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsRelativeLinksResolve follows every relative link of the README,
// docs/*.md, examples/README.md and BENCHMARKS.md to a file, and every
// #anchor to a heading of the page it names.
func TestDocsRelativeLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range []string{"README.md", "BENCHMARKS.md", "examples/README.md"} {
		pages = append(pages, filepath.Join(root, filepath.FromSlash(p)))
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(link, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: no such file", rel(page), link)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !hasAnchor(t, target, anchor) {
				t.Errorf("%s: link %s: no heading with that anchor in %s", rel(page), link, rel(target))
			}
		}
	}
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// hasAnchor reports whether a Markdown page has a heading whose GitHub
// anchor is anchor: lower case, spaces to hyphens, punctuation other than
// hyphens and underscores dropped.
func hasAnchor(t *testing.T, page, anchor string) bool {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if githubAnchor(heading) == anchor {
			return true
		}
	}
	return false
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// report fails the test with one line per missing word, naming where the
// word came from.
func report(t *testing.T, what string, missing map[string][]string) {
	t.Helper()
	words := make([]string, 0, len(missing))
	for w := range missing {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		t.Errorf("%s %s (from %s)", what, w, strings.Join(missing[w], ", "))
	}
}
