package web

import (
	"strconv"
	"time"

	"github.com/redbite/leasewrap/internal/escape"
)

// html is a page being written. Pages are written by appending to one
// buffer rather than through templates: a timeline of 10,000 runs is
// 10,000 boxes and 10,000 table rows, and a template's per-element cost
// would dominate the page's time.
type html struct{ buf []byte }

func (b *html) raw(s string) { b.buf = append(b.buf, s...) }

// text writes s from the database as text or as an attribute's value:
// first what a terminal or a browser would act on or hide (ESC, direction
// overrides, invalid UTF-8) spelled out as escape.Printable does, then
// HTML's special characters as entities. Nothing of s can open an element
// or leave a quoted attribute.
func (b *html) text(s string) {
	s = escape.Printable(s)
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

// attr writes an attribute's value; it escapes as text does.
func (b *html) attr(s string) { b.text(s) }

func (b *html) int(n int64) { b.buf = strconv.AppendInt(b.buf, n, 10) }

// num writes a coordinate with one decimal, enough at the SVG's scale.
func (b *html) num(f float64) { b.buf = strconv.AppendFloat(b.buf, f, 'f', 1, 64) }

// time writes t as a <time> element in UTC; the script adds the viewer's
// local time as its title.
func (b *html) time(t time.Time) {
	t = t.UTC()
	b.raw(`<time datetime="`)
	b.buf = t.AppendFormat(b.buf, time.RFC3339)
	b.raw(`">`)
	b.buf = t.AppendFormat(b.buf, "2006-01-02 15:04:05")
	b.raw(`</time>`)
}

// head opens a page; root is the relative path back to / ("" or "../"),
// so that the page works under a reverse proxy's path prefix.
func (b *html) head(title, root string) {
	b.raw(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">` +
		`<meta name="viewport" content="width=device-width, initial-scale=1"><title>`)
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
