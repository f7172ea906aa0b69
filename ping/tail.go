package ping

import (
	"sync"
	"unicode/utf8"
)

// DefaultTailSize is how many bytes of output NewTail keeps when given no
// size: 10,000, the default body limit of a self-hosted healthchecks server
// (healthchecks.io keeps 100,000).
const DefaultTailSize = 10_000

// Tail is an io.Writer that keeps the last bytes written to it, in a ring
// buffer of fixed size. It is safe for concurrent use, and Write never
// fails, so it can sit in an io.MultiWriter next to the real stderr without
// ever stopping the copy. See the package documentation for what teeing a
// child's stderr into it costs.
type Tail struct {
	mu    sync.Mutex
	buf   []byte
	w     int  // next write position
	full  bool // buf has wrapped at least once
	total int64
}

// NewTail returns a Tail that keeps the last size bytes; size <= 0 means
// DefaultTailSize.
func NewTail(size int) *Tail {
	if size <= 0 {
		size = DefaultTailSize
	}
	return &Tail{buf: make([]byte, size)}
}

// Write keeps the last bytes of p. It always returns len(p), nil.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.buf)
	t.total += int64(len(p))
	if len(p) >= n {
		copy(t.buf, p[len(p)-n:])
		t.w, t.full = 0, true
		return len(p), nil
	}
	k := copy(t.buf[t.w:], p)
	copy(t.buf, p[k:]) // the rest, if any, wraps to the start
	t.w += len(p)
	if t.w >= n {
		t.w -= n
		t.full = true
	}
	return len(p), nil
}

// Bytes returns a copy of the bytes kept, oldest first. When older output
// was dropped, the copy starts at the first whole UTF-8 character, so that
// a monitor that stores only valid UTF-8 text keeps it.
func (t *Tail) Bytes() []byte { return t.Last(len(t.buf)) }

// Last is Bytes cut to the last n bytes at most (again starting at a whole
// UTF-8 character when it had to cut): the part of a larger tail that
// goes in a ping.
func (t *Tail) Last(n int) []byte {
	out, dropped := t.since(0, n)
	if dropped {
		out = alignStart(out)
	}
	return out
}

// Since returns a copy of the last n bytes at most of those written since
// Written returned mark, as they were written, cut anywhere: the output of
// one part of a longer run. Bytes older than the tail's size are gone.
func (t *Tail) Since(mark int64, n int) []byte {
	out, _ := t.since(mark, n)
	return out
}

// since returns the last n bytes at most written after mark and kept, and
// whether older bytes written after mark were left out.
func (t *Tail) since(mark int64, n int) (out []byte, dropped bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.w
	if t.full {
		kept = len(t.buf)
	}
	written := max(t.total-mark, 0)
	k := int(min(int64(max(n, 0)), int64(kept), written))
	out = make([]byte, k)
	// The last k bytes end at t.w and may wrap to the end of buf.
	if head := min(k, t.w); head > 0 {
		copy(out[k-head:], t.buf[t.w-head:t.w])
	}
	if rest := k - min(k, t.w); rest > 0 {
		copy(out, t.buf[len(t.buf)-rest:])
	}
	return out, written > int64(k)
}

// Written returns how many bytes were written in all, kept or not.
func (t *Tail) Written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// lastBytes returns the last n bytes of b (all of b if it is shorter),
// starting at a whole UTF-8 character when it had to cut.
func lastBytes(b []byte, n int) []byte {
	if n <= 0 || len(b) <= n {
		return b
	}
	return alignStart(b[len(b)-n:])
}

// alignStart drops the continuation bytes (at most three) of a UTF-8
// character whose first byte was cut off the start of b.
func alignStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
