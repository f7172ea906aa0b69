// Package redact keeps the database password out of everything leasewrap
// writes: log lines (JSON stays JSON), error messages and output.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/redbite/leasewrap/internal/escape"
)

// Redactor removes the connection's password from text. Every log line and
// error message leaves leasewrap through it: pgx does not print passwords,
// but a server message or a resolver may echo what it was given.
type Redactor struct {
	secrets []string
	mask    string // what a secret becomes; it shares no character with any
}

// masks are the candidates for Redactor.mask, in order of preference.
var masks = []string{"xxxxx", "*****", "#####", "_____", "....."}

// New knows the password of dsn as written, before anything has
// parsed it (a string pgx cannot parse may still be echoed); openDatabase
// adds the one pgx parsed, percent-decoded.
func New(dsn string) *Redactor {
	r := &Redactor{mask: masks[0]}
	if _, rest, ok := strings.Cut(dsn, ":"); ok {
		if userinfo, _, ok := strings.Cut(strings.TrimPrefix(rest, "//"), "@"); ok {
			if _, raw, ok := strings.Cut(userinfo, ":"); ok {
				r.Add(raw)
			}
		}
	}
	for _, field := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(field, "password="); ok {
			r.Add(strings.Trim(v, "'"))
		}
	}
	return r
}

// Add learns a secret, and picks a mask none of the secrets has a character
// of: a mask could otherwise complete a secret with the text beside it
// (password "ax" in "aax"), or be one (password "xxxxx"). When every mask
// collides, secrets are removed instead.
func (r *Redactor) Add(secret string) {
	if secret == "" {
		return
	}
	r.secrets = append(r.secrets, secret)
	r.mask = ""
	for _, m := range masks {
		if !slices.ContainsFunc(r.secrets, func(s string) bool { return strings.ContainsAny(s, m[:1]) }) {
			r.mask = m
			return
		}
	}
}

// String returns s with every secret replaced. A removal can join two parts
// into a secret again, hence the loop; each round makes s shorter.
func (r *Redactor) String(s string) string {
	for again := true; again; {
		again = false
		for _, secret := range r.secrets {
			if strings.Contains(s, secret) {
				s = strings.ReplaceAll(s, secret, r.mask)
				again = r.mask == ""
			}
		}
	}
	return s
}

// Wrap returns err with its message redacted, for output that does not go
// through the logger. errors.Is and errors.As still see the whole chain.
func (r *Redactor) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, r: r}
}

// redactedError is an error whose message is redacted; Unwrap returns the
// original, whose own message is not.
type redactedError struct {
	err error
	r   *Redactor
}

func (e *redactedError) Error() string { return e.r.String(e.err.Error()) }

func (e *redactedError) Unwrap() error { return e.err }

// Writer returns w, which takes zerolog's JSON lines, with the secrets
// masked in every line's string values (see JSON) and hidden characters
// escaped. zerolog writes one whole line per call.
func (r *Redactor) Writer(w io.Writer) io.Writer { return redactWriter{r, w} }

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (rw redactWriter) Write(p []byte) (int, error) {
	line, ok := rw.r.JSON(p)
	if !ok { // not zerolog's: mask it as text
		line = []byte(rw.r.String(string(p)))
	}
	// Names read from the table may hold characters a terminal acts on;
	// zerolog escapes only those below U+0020.
	line = escape.SafeJSON(line)
	if _, err := rw.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON returns line, one JSON value, with the secrets masked in its string
// values. Names, numbers and the order of fields are kept: replacing a
// password as a substring of the line would break the syntax ("1" in a
// number, "level" in a name, a quote). ok is false if line is not JSON.
// A line that holds no secret as written and no escape (every string in
// it is then a part of it as written) is returned as it is, unparsed:
// almost every line.
func (r *Redactor) JSON(line []byte) (_ []byte, ok bool) {
	if !r.mayHide(line) {
		return line, true
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	out := bytes.NewBuffer(make([]byte, 0, len(line)+16))
	type container struct {
		object bool
		n      int // tokens so far: in an object, even ones are names
	}
	var open []container
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			open = open[:len(open)-1]
			out.WriteByte(byte(d))
			continue
		}
		name := false
		if len(open) > 0 {
			c := &open[len(open)-1]
			switch {
			case c.object && c.n%2 == 1:
				out.WriteByte(':')
			case c.n > 0:
				out.WriteByte(',')
			}
			name = c.object && c.n%2 == 0
			c.n++
		}
		if d, ok := tok.(json.Delim); ok {
			out.WriteByte(byte(d))
			open = append(open, container{object: d == '{'})
			continue
		}
		if v, ok := tok.(string); ok && !name {
			tok = r.String(v)
		}
		writeJSONScalar(out, tok)
	}
	if len(open) > 0 || out.Len() == 0 {
		return nil, false
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes(), true
}

// mayHide reports whether a string value in line, JSON, may hold a secret.
func (r *Redactor) mayHide(line []byte) bool {
	if len(r.secrets) == 0 {
		return false
	}
	if bytes.IndexByte(line, '\\') >= 0 {
		return true
	}
	for _, secret := range r.secrets {
		if bytes.Contains(line, []byte(secret)) {
			return true
		}
	}
	return false
}

// writeJSONScalar writes tok, a string, number, bool or null token of a
// json.Decoder with UseNumber, as JSON.
func writeJSONScalar(out *bytes.Buffer, tok json.Token) {
	switch v := tok.(type) {
	case string:
		writeJSONString(out, v)
	case json.Number:
		out.WriteString(v.String())
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case nil:
		out.WriteString("null")
	}
}

// writeJSONString writes s quoted, leaving <, > and & as they are (as
// zerolog does).
func writeJSONString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
}
