package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// TestDocsNameEveryFlagAndVariable reads every help-*.txt golden file (what
// `leasewrap --help` and `leasewrap SUB --help` print; TestHelpGolden keeps
// them current) and wants each flag and environment variable named in
// docs/configuration.md. Each subcommand must have its golden file, so that
// a new one cannot escape the check.
func TestDocsNameEveryFlagAndVariable(t *testing.T) {
	dir := helpDir(t)
	helps, err := filepath.Glob(filepath.Join(dir, "help-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rootHelp, err := os.ReadFile(filepath.Join(dir, "help-root.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range subcommands(t, string(rootHelp)) {
		if !slices.Contains(helps, filepath.Join(dir, "help-"+sub+".txt")) {
			t.Errorf("no %s/help-%s.txt: add `%s --help` to TestHelpGolden and run it with -update", rel(dir), sub, sub)
		}
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

// childVariable is a variable leasewrap sets in the command's environment.
var childVariable = regexp.MustCompile(`"(LEASEWRAP_[A-Z0-9_]+)="`)

// TestDocsNameEveryChildVariable wants every variable leasewrap sets for the
// command ("LEASEWRAP_X=" in the code) in docs/configuration.md, whose
// table of the command's environment is where a reader looks for it.
func TestDocsNameEveryChildVariable(t *testing.T) {
	config := read(t, "docs/configuration.md")
	missing := map[string][]string{}
	n := 0
	for path, src := range goSources(t) {
		for _, m := range childVariable.FindAllStringSubmatch(src, -1) {
			n++
			if !mentions(config, m[1]) {
				missing[m[1]] = append(missing[m[1]], path)
			}
		}
	}
	if n == 0 {
		t.Fatal(`no "LEASEWRAP_X=" found in the code: update the test`)
	}
	report(t, "docs/configuration.md does not name", missing)
}

// TestDocsNameEveryMetric wants every metric the exporter serves
// (prometheus.NewDesc, as its collector declares them) in
// docs/monitoring.md, and every metric of --http-addr (a *Opts Name) in
// docs/standby.md, wherever in the code they are declared.
func TestDocsNameEveryMetric(t *testing.T) {
	sources := goSources(t)
	for _, c := range []struct{ pattern, doc string }{
		{`prometheus\.NewDesc\(\s*"(leasewrap_[a-z0-9_]+)"`, "docs/monitoring.md"},
		{`Opts\{Name:\s*"(leasewrap_[a-z0-9_]+)"`, "docs/standby.md"},
	} {
		doc, re := read(t, c.doc), regexp.MustCompile(c.pattern)
		missing := map[string][]string{}
		n := 0
		for path, src := range sources {
			for _, m := range re.FindAllStringSubmatch(src, -1) {
				n++
				if !mentions(doc, m[1]) {
					missing[m[1]] = append(missing[m[1]], path)
				}
			}
		}
		if n == 0 {
			t.Errorf("no metric found in the code with %s: update the test", c.pattern)
		}
		report(t, c.doc+" does not name", missing)
	}
}

// TestDocsReadmeNamesEverySubcommand wants each subcommand that
// `leasewrap --help` lists named in the README as `leasewrap SUB`.
func TestDocsReadmeNamesEverySubcommand(t *testing.T) {
	help, err := os.ReadFile(filepath.Join(helpDir(t), "help-root.txt"))
	if err != nil {
		t.Fatal(err)
	}
	readme := read(t, "README.md")
	missing := map[string][]string{}
	for _, sub := range subcommands(t, string(help)) {
		if !mentions(readme, "leasewrap "+sub) {
			missing["leasewrap "+sub] = []string{"help-root.txt"}
		}
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
