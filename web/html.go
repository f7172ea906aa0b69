// The package writes HTML itself, not through html/template: html/template
// renders the 10,000-run job page about nine times slower than this builder
// (BenchmarkJobPageTemplate against BenchmarkJobPage), some 400 ms where the
// page's goal is 100 ms; TestJobPageTemplateWritesTheBuildersPage keeps the
// comparison fair.

package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/redbite/leasewrap/internal/escape"
)

// html is a page being written. Pages are written by appending to one
// buffer rather than through templates: a timeline of 10,000 runs is
// 10,000 boxes and 10,000 table rows, and a template's per-element cost
// would dominate the page's time.
type html struct {
	buf []byte
	// refresh, when not 0, is the seconds after which the page loads
	// itself again (?refresh=).
	refresh int
}

func (b *html) raw(s string) { b.buf = append(b.buf, s...) }

// text writes s from the database as text or as an attribute's value:
// first what a terminal or a browser would act on or hide (ESC, direction
// overrides, invalid UTF-8) spelled out as escape.Printable does, then
// HTML's special characters as entities. Nothing of s can open an element
// or leave a quoted attribute.
func (b *html) text(s string) { b.entities(escape.Printable(s)) }

// printed writes s that is already printable: text whose parts from the
// database were escaped once, as a verdict's reason is (inspect.Judge
// escapes the job name and holders in it). Escaping its backslashes again
// would show a name otherwise than every other view: the job a'b"c\d,
// printed a'b"c\\d, as a'b"c\\\\d.
// Anything left that a browser would act on or hide is still spelled
// out, as escape.Text does, and HTML's special characters made entities.
func (b *html) printed(s string) { b.entities(string(escape.Text([]byte(s)))) }

// entities writes s with HTML's special characters as entities.
func (b *html) entities(s string) {
	start := 0
	for i := 0; i < len(s); i++ {
		var ent string
		switch s[i] {
		case '<':
			ent = "&lt;"
		case '>':
			ent = "&gt;"
		case '&':
			ent = "&amp;"
		case '"':
			ent = "&#34;"
		case '\'':
			ent = "&#39;"
		default:
			continue
		}
		b.buf = append(b.buf, s[start:i]...)
		b.buf = append(b.buf, ent...)
		start = i + 1
	}
	b.buf = append(b.buf, s[start:]...)
}

// lines writes a run's output as text: as text does, but its line breaks
// and tabs kept.
func (b *html) lines(s string) {
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.raw("\n")
		}
		for j, cell := range strings.Split(line, "\t") {
			if j > 0 {
				b.raw("\t")
			}
			b.text(cell)
		}
	}
}

// attr writes an attribute's value; it escapes as text does.
func (b *html) attr(s string) { b.text(s) }

func (b *html) int(n int64) { b.buf = strconv.AppendInt(b.buf, n, 10) }

// count writes n and the noun for one or for several.
func (b *html) count(n int, one, several string) {
	b.int(int64(n))
	b.raw(" ")
	if n == 1 {
		b.raw(one)
	} else {
		b.raw(several)
	}
}

// num writes a coordinate with one decimal, enough at the SVG's scale.
func (b *html) num(f float64) { b.buf = strconv.AppendFloat(b.buf, f, 'f', 1, 64) }

// time writes t as a <time> element in UTC; the script adds the viewer's
// local time as its title.
func (b *html) time(t time.Time) {
	b.raw(`<time datetime="`)
	b.stamp(t)
	b.raw(`">`)
	b.clock(t, ' ')
	b.raw(`</time>`)
}

// timeWrapped writes t as time does, its date and its time of day each
// unbroken, so that a narrow cell breaks it between them only.
func (b *html) timeWrapped(t time.Time) {
	t = t.UTC()
	b.raw(`<time datetime="`)
	b.stamp(t)
	b.raw(`"><span>`)
	b.date(t)
	b.raw(`</span> <span>`)
	b.timeOfDay(t)
	b.raw(`</span></time>`)
}

// stamp writes t in UTC as RFC 3339 with milliseconds, which a browser's
// Date parses: 2026-03-01T08:00:00.250Z.
func (b *html) stamp(t time.Time) {
	b.clock(t, 'T')
	ms := t.Nanosecond() / int(time.Millisecond)
	b.buf = append(b.buf, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// clock writes t in UTC as date, sep, time of day: 2026-03-01 08:00:00.
// It is time.Format's layout, written directly: a page of many runs
// writes several times per run.
func (b *html) clock(t time.Time, sep byte) {
	t = t.UTC()
	b.date(t)
	b.buf = append(b.buf, sep)
	b.timeOfDay(t)
}

// date writes t's date: 2026-03-01.
func (b *html) date(t time.Time) {
	year, month, day := t.Date()
	b.buf = strconv.AppendInt(b.buf, int64(year), 10)
	b.buf = append(b.buf, '-', byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10))
}

// timeOfDay writes t's time of day: 08:00:00.
func (b *html) timeOfDay(t time.Time) {
	hour, minute, second := t.Clock()
	b.buf = append(b.buf, byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+second/10), byte('0'+second%10))
}

// head opens a page; root is the relative path back to / ("" or "../"),
// so that the page works under a reverse proxy's path prefix.
func (b *html) head(title, root string) {
	b.raw(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">` +
		`<meta name="viewport" content="width=device-width, initial-scale=1">`)
	if b.refresh > 0 {
		// A meta refresh, not a script: it works without JavaScript and
		// the CSP has nothing to allow for it.
		b.raw(`<meta http-equiv="refresh" content="`)
		b.int(int64(b.refresh))
		b.raw(`">`)
	}
	b.raw(`<title>`)
	b.text(title)
	b.raw(`</title><link rel="stylesheet" href="`)
	b.attr(root)
	b.raw(`assets/style.css"><script src="`)
	b.attr(root)
	b.raw(`assets/app.js" defer></script></head><body>`)
}

func (b *html) foot() { b.raw(`</body></html>`) }

// duration writes d rounded for reading: 850ms, 12.4s, 3m05s, 2h10m.
func (b *html) duration(d time.Duration) {
	switch {
	case d < time.Second:
		b.int(d.Milliseconds())
		b.raw("ms")
	case d < time.Minute:
		b.buf = strconv.AppendFloat(b.buf, d.Seconds(), 'f', 1, 64)
		b.raw("s")
	case d < time.Hour:
		m, s := int64(d/time.Minute), int64(d%time.Minute/time.Second)
		b.int(m)
		b.raw("m")
		b.two(s)
		b.raw("s")
	default:
		h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
		b.int(h)
		b.raw("h")
		b.two(m)
		b.raw("m")
	}
}

func (b *html) two(n int64) {
	if n < 10 {
		b.raw("0")
	}
	b.int(n)
}
