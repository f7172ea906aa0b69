//go:build !urfave_cli_no_docs

// Command gen-docs writes leasewrap's release-time documents, the man page
// and the bash and zsh completions that the .deb and .rpm packages install,
// into the directory it is given:
//
//	go run ./cmd/gen-docs dist-docs
//
// writes dist-docs/leasewrap.1.gz, dist-docs/leasewrap.bash and
// dist-docs/_leasewrap. It is a program of its own so that the shipped
// binary (built with urfave_cli_no_docs) links neither urfave/cli's man
// page code nor its markdown renderer; that tag leaves this program out.
//
// The completions are static scripts made from the app's commands and flags:
// urfave/cli's own scripts ask the binary to complete by running it with the
// command line, which for leasewrap would run the child after "--".
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/redbite/leasewrap/command"
	"github.com/redbite/leasewrap/command/cmdutil"
)

func main() {
	if len(os.Args) != 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: gen-docs DIR (the directory to write the man page and completions into)")
		os.Exit(64)
	}
	if err := genDocs(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "gen-docs: %v\n", err)
		os.Exit(1)
	}
}

func genDocs(dir string) error {
	app := command.NewApp(os.Stdout, os.Stderr)
	man, err := manPage(app)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{
		"leasewrap.1.gz": man,
		"leasewrap.bash": []byte(bashCompletion(app)),
		"_leasewrap":     []byte(zshCompletion(app)),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// manPage is urfave/cli's man page in section 1, with the app's usage
// lines as its SYNOPSIS, and examples, the environment and the exit
// statuses appended, gzipped without a name or time so that it is
// reproducible.
func manPage(app *cli.App) ([]byte, error) {
	roff, err := manRoff(app)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write([]byte(roff)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// manRoff is the man page's roff source.
func manRoff(app *cli.App) (string, error) {
	// urfave/cli writes markdown and renders it: "<hostname>" would be
	// taken for an HTML tag and dropped.
	markdownSafeUsage(app.Flags)
	for _, c := range app.Commands {
		markdownSafeUsage(c.Flags)
	}
	roff, err := app.ToManWithSection(1)
	if err != nil {
		return "", err
	}
	// urfave/cli's SYNOPSIS lists every global flag and no command.
	start, end := strings.Index(roff, ".SH SYNOPSIS"), strings.Index(roff, ".SH DESCRIPTION")
	if start < 0 || end < start {
		return "", fmt.Errorf("man page without SYNOPSIS and DESCRIPTION")
	}
	roff = roff[:start] + synopsisRoff(app) + roff[end:]
	return strings.TrimRight(roff, "\n") + "\n" + examplesRoff + environmentRoff(app) + exitStatusRoff(), nil
}

// synopsisRoff is the app's usage lines, one a line.
func synopsisRoff(app *cli.App) string {
	var b strings.Builder
	b.WriteString(".SH SYNOPSIS\n")
	for _, line := range strings.Split(app.UsageText, "\n") {
		fmt.Fprintf(&b, "%s\n.br\n", roffEscape(strings.TrimSpace(line)))
	}
	return b.String() + "\n"
}

// examplesRoff shows the three ways to run a job and the views of it.
const examplesRoff = `.SH EXAMPLES
.PP
A crontab line on every host; one of them runs the job, the others skip:
.EX
0 2 * * * /usr/bin/leasewrap \-\-id "$(hostname)" \-\-job nightly_report \-\-hold\-for 10m \-\- /opt/report/run
.EE
.PP
A service with standbys; one runs the command, the others take over when it stops:
.EX
leasewrap \-\-job consumer \-\-wait \-\- /usr/bin/consumer
.EE
.PP
The schedule in leasewrap instead of cron, on every host:
.EX
leasewrap \-\-job nightly_report \-\-schedule '0 2 * * *' \-\-timezone Europe/Berlin \-\- /opt/report/run
.EE
.PP
What ran, and a monitoring check of it:
.EX
leasewrap status
leasewrap history \-\-job nightly_report
leasewrap check \-\-job nightly_report \-\-max\-age 26h
.EE
`

// markdownSafeUsage escapes angle brackets in the flags' usage texts.
func markdownSafeUsage(flags []cli.Flag) {
	r := strings.NewReplacer("<", `\<`, ">", `\>`)
	for _, f := range flags {
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		if u := v.Elem().FieldByName("Usage"); u.IsValid() && u.Kind() == reflect.String && u.CanSet() {
			u.SetString(r.Replace(u.String()))
		}
	}
}

// environmentRoff lists the environment variables behind the flags, top
// level first, each once.
func environmentRoff(app *cli.App) string {
	var b strings.Builder
	b.WriteString(".SH ENVIRONMENT\nEach option listed here can also be set by an environment variable; a flag on the command line wins.\n")
	seen := map[string]bool{}
	flags := append([]cli.Flag(nil), app.Flags...)
	for _, c := range app.Commands {
		flags = append(flags, c.Flags...)
	}
	for _, f := range flags {
		d, ok := f.(cli.DocGenerationFlag)
		if !ok || len(d.GetEnvVars()) == 0 {
			continue
		}
		vars := strings.Join(d.GetEnvVars(), ", ")
		if seen[vars] {
			continue
		}
		seen[vars] = true
		fmt.Fprintf(&b, ".TP\n.B %s\n\\-\\-%s\n", roffEscape(vars), roffEscape(f.Names()[0]))
	}
	return b.String()
}

func exitStatusRoff() string {
	var b strings.Builder
	b.WriteString(".SH EXIT STATUS\n")
	for _, s := range cmdutil.ExitStatuses() {
		fmt.Fprintf(&b, ".TP\n%s\n%s\n", roffEscape(s.Code), roffEscape(s.Meaning))
	}
	b.WriteString(".SH SEE ALSO\n/usr/share/doc/leasewrap/README.md, /usr/share/doc/leasewrap/docs/ and /usr/share/doc/leasewrap/examples/\n")
	return b.String()
}

// roffEscape keeps a line of text from being read as a roff request or
// escape.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// compFlag is one flag as the completions see it.
type compFlag struct {
	names  []string // with dashes: "--job", "-h"
	value  bool     // takes a value
	usage  string
	values []string // fixed choices, if any
}

// flagChoices lists the values of flags that take one of a few words.
var flagChoices = map[string][]string{
	"log-level":  {"trace", "debug", "info", "warn", "error"},
	"log-format": {"json", "console", "auto"},
}

func compFlags(flags []cli.Flag) []compFlag {
	var out []compFlag
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		var cf compFlag
		for _, n := range f.Names() {
			if len(n) == 1 {
				cf.names = append(cf.names, "-"+n)
			} else {
				cf.names = append(cf.names, "--"+n)
			}
			if cf.values == nil {
				cf.values = flagChoices[n]
			}
		}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			cf.value = d.TakesValue()
			cf.usage = d.GetUsage()
		}
		out = append(out, cf)
	}
	// urfave/cli adds --help to every command that does not hide it.
	out = append(out, compFlag{names: []string{"--help", "-h"}, usage: "show help"})
	return out
}

// compCommand is the top level ("") or one subcommand.
type compCommand struct {
	name, usage string
	flags       []compFlag
}

func compCommands(app *cli.App) []compCommand {
	out := []compCommand{{name: "", usage: app.Usage, flags: compFlags(app.Flags)}}
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		out = append(out, compCommand{name: c.Name, usage: c.Usage, flags: compFlags(c.Flags)})
	}
	return out
}

// bashTail completes flags, subcommands and the child's command line, and
// values: the words between its %s are the subcommands and the value cases.
const bashTail = `  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W %s -- "$cur"))
    ((${#COMPREPLY[@]})) || COMPREPLY=($(compgen -c -- "$cur"))
  else
    COMPREPLY=()
  fi
}

# _leasewrap_value completes the value of flag $1.
_leasewrap_value() {
  case $1 in
%s  *) COMPREPLY=() ;;
  esac
}

# _leasewrap_child completes the child's command line from word $1 on.
_leasewrap_child() {
  if declare -F _command_offset >/dev/null; then
    _command_offset "$1"
  elif (($1 == COMP_CWORD)); then
    COMPREPLY=($(compgen -c -- "${COMP_WORDS[COMP_CWORD]}"))
  else
    COMPREPLY=($(compgen -f -- "${COMP_WORDS[COMP_CWORD]}"))
  fi
}

complete -F _leasewrap leasewrap
`

func bashCompletion(app *cli.App) string {
	cmds := compCommands(app)
	var subs []string
	for _, c := range cmds[1:] {
		subs = append(subs, c.name)
	}
	var b strings.Builder
	b.WriteString(`# bash completion for leasewrap. Generated at release time from the
# commands and flags (go run ./cmd/gen-docs DIR).

_leasewrap() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local cmd="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    case $w in
    --)
      # The rest is the child's command line.
      _leasewrap_child $((i + 1))
      return
      ;;
    -*=*) ;;
`)
	b.WriteString(skipValueCases(cmds))
	fmt.Fprintf(&b, `    -*) ;;
    *)
      if [[ -z $cmd ]]; then
        case $w in
        %s) cmd=$w ;;
        *)
          # Without "--", the first other word starts the child's command.
          _leasewrap_child "$i"
          return
          ;;
        esac
      fi
      ;;
    esac
  done

  local opts
  case $cmd in
`, strings.Join(subs, "|"))
	b.WriteString(optsCases(cmds))
	fmt.Fprintf(&b, bashTail, shellQuote(strings.Join(subs, " ")), valueCases(cmds))
	return b.String()
}

// skipValueCases are the case branches that skip the value of a flag that
// takes one, so that "--job status" does not look like the status command:
// for each such flag, the commands it takes a value in.
func skipValueCases(cmds []compCommand) string {
	var out strings.Builder
	takers := map[string][]string{}
	var order []string
	for _, c := range cmds {
		for _, f := range c.flags {
			if !f.value {
				continue
			}
			for _, n := range f.names {
				if _, seen := takers[n]; !seen {
					order = append(order, n)
				}
				takers[n] = append(takers[n], shellWord(c.name))
			}
		}
	}
	groups := map[string][]string{}
	var groupOrder []string
	for _, n := range order {
		key := strings.Join(takers[n], "|")
		if _, seen := groups[key]; !seen {
			groupOrder = append(groupOrder, key)
		}
		groups[key] = append(groups[key], n)
	}
	for _, key := range groupOrder {
		fmt.Fprintf(&out, "    %s)\n      case $cmd in %s) ((++i < COMP_CWORD)) || { _leasewrap_value \"$w\"; return; } ;; esac\n      ;;\n",
			strings.Join(groups[key], "|"), key)
	}
	return out.String()
}

// optsCases set opts to each command's flags.
func optsCases(cmds []compCommand) string {
	var out strings.Builder
	for _, c := range cmds {
		label := shellWord(c.name)
		if c.name == "" {
			label = `""`
		}
		fmt.Fprintf(&out, "  %s)\n", label)
		var names []string
		for _, f := range c.flags {
			names = append(names, f.names...)
		}
		fmt.Fprintf(&out, "    opts=%s\n    ;;\n", shellQuote(strings.Join(names, " ")))
	}
	return out.String()
}

// valueCases are the case branches of _leasewrap_value: the flags that take
// one of a few words.
func valueCases(cmds []compCommand) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, c := range cmds {
		for _, f := range c.flags {
			if len(f.values) == 0 || seen[f.names[0]] {
				continue
			}
			seen[f.names[0]] = true
			fmt.Fprintf(&b, "  %s) COMPREPLY=($(compgen -W %s -- \"${COMP_WORDS[COMP_CWORD]}\")) ;;\n",
				strings.Join(f.names, "|"), shellQuote(strings.Join(f.values, " ")))
		}
	}
	return b.String()
}

func zshCompletion(app *cli.App) string {
	cmds := compCommands(app)
	var b strings.Builder
	b.WriteString(`#compdef leasewrap
# zsh completion for leasewrap. Generated at release time from the commands
# and flags (go run ./cmd/gen-docs DIR).

_leasewrap() {
  local curcontext=$curcontext state line ret=1
  local -a subcommands
  integer dd=${words[(i)--]}
  # After "--" everything is the child's command line.
  if (( dd < CURRENT )); then
    shift $dd words
    (( CURRENT -= dd ))
    _normal
    return
  fi
  subcommands=(
`)
	for _, c := range cmds[1:] {
		fmt.Fprintf(&b, "    %s\n", shellQuote(zshEscape(c.name)+":"+c.usage))
	}
	b.WriteString("  )\n")
	b.WriteString("  _arguments -C \\\n")
	writeZshSpecs(&b, cmds[0].flags)
	b.WriteString(`    '1: :->first' \
    '*:: :->rest' && ret=0
  case $state in
  first)
    _alternative \
      'subcommands:subcommand:{_describe subcommand subcommands}' \
      'commands:command:_command_names -e' && ret=0
    ;;
  rest)
    case ${line[1]} in
`)
	for _, c := range cmds[1:] {
		fmt.Fprintf(&b, "    %s)\n      _arguments \\\n", shellWord(c.name))
		writeZshSpecs(&b, c.flags)
		b.WriteString("        && ret=0\n      ;;\n")
	}
	b.WriteString(`    *)
      # Without "--", the first word that is not a subcommand starts the
      # child's command.
      _normal && ret=0
      ;;
    esac
    ;;
  esac
  return ret
}

_leasewrap "$@"
`)
	return b.String()
}

// writeZshSpecs writes one _arguments spec per flag, each line ending in a
// backslash.
func writeZshSpecs(b *strings.Builder, flags []compFlag) {
	for _, f := range flags {
		names := append([]string(nil), f.names...)
		sort.Strings(names)
		desc := "[" + zshEscape(f.usage) + "]"
		for _, n := range names {
			exclusion := ""
			if len(names) > 1 {
				exclusion = "(" + strings.Join(names, " ") + ")"
			}
			spec := exclusion + n
			if f.value {
				action := " "
				if len(f.values) > 0 {
					action = "(" + strings.Join(f.values, " ") + ")"
				}
				if strings.HasPrefix(n, "--") {
					spec += "="
				}
				spec += desc + ":" + strings.TrimLeft(n, "-") + ":" + action
			} else {
				spec += desc
			}
			fmt.Fprintf(b, "    %s \\\n", shellQuote(spec))
		}
	}
}

// zshEscape escapes what _arguments and _describe read specially in a
// description or a name.
func zshEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`, `:`, `\:`)
	return r.Replace(s)
}

// shellQuote quotes s in single quotes for sh, bash and zsh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord is a command name as a case pattern; the names are plain words.
func shellWord(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
