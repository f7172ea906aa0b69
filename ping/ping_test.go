package ping_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/internal/lwtest"
	"github.com/redbite/leasewrap/ping"
)

// secret stands for a check's UUID: it must never show in a log line.
const secret = "5f1c2d3e-0000-4000-8000-00000000beef"

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// pingURL is the check's ping URL on m.
func pingURL(m *lwtest.Monitor) string { return m.URL + "/" + secret }

// logBuf is a log sink safe for the sender goroutine and the test.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newPinger(t *testing.T, raw string, opts ...ping.Option) (*ping.Pinger, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	opts = append([]ping.Option{
		ping.WithLogger(zerolog.New(logs).Level(zerolog.DebugLevel)),
		ping.WithBackoff(time.Millisecond),
		ping.WithTimeout(5 * time.Second),
	}, opts...)
	p, err := ping.New(raw, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, logs
}

func closeIn(t *testing.T, p *ping.Pinger, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return p.Close(ctx)
}

// took runs f and returns how long it took, failing the test (without
// waiting for f) when that is more than max.
func took(t *testing.T, what string, max time.Duration, f func()) time.Duration {
	t.Helper()
	t0 := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return time.Since(t0)
	case <-time.After(max):
		t.Fatalf("%s still blocked after %s", what, max)
		return 0
	}
}

func noSecret(t *testing.T, logs *logBuf) {
	t.Helper()
	if strings.Contains(logs.String(), secret) {
		t.Errorf("log shows the check's secret:\n%s", logs)
	}
}

func TestStartThenSuccess(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	p, logs := newPinger(t, pingURL(m), ping.WithUserAgent("leasewrap/test"))
	p.Start()
	p.Finish(0, nil)
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatalf("Close: %v", err)
	}
	reqs := m.Wait(t, 2)
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want 2: %+v", len(reqs), reqs)
	}
	for i, want := range []string{"/" + secret + "/start", "/" + secret} {
		r := reqs[i]
		if r.Method != http.MethodPost || r.Path != want || r.Body != "" || r.UA != "leasewrap/test" {
			t.Errorf("request %d = %s %s body %q UA %q, want POST %s, empty body, our UA", i, r.Method, r.Path, r.Body, r.UA, want)
		}
	}
	if strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("warnings for pings that worked:\n%s", logs)
	}
	noSecret(t, logs)
}

func TestFailureCarriesExitCodeAndBoundedTail(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	p, _ := newPinger(t, pingURL(m))
	tail := ping.NewTail(100)
	var all strings.Builder
	for i := range 200 {
		line := fmt.Sprintf("line %d\n", i)
		all.WriteString(line)
		_, _ = tail.Write([]byte(line))
	}
	p.Start()
	p.Finish(3, tail.Bytes())
	reqs := m.Wait(t, 2)
	final := reqs[1]
	if final.Path != "/"+secret+"/3" {
		t.Errorf("final ping path = %q, want /<uuid>/3", final.Path)
	}
	want := all.String()[all.Len()-100:]
	if final.Body != want {
		t.Errorf("final ping body = %q, want the last 100 bytes %q", final.Body, want)
	}
	if !strings.HasSuffix(final.Body, "line 199\n") || len(final.Body) > 100 {
		t.Errorf("body is %d bytes, ending %q: want at most 100, ending with the last line", len(final.Body), final.Body)
	}
	if final.ContentType != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q", final.ContentType)
	}
}

func TestFinalPingPathByStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		suffix string
	}{
		{0, ""}, {1, "/1"}, {2, "/2"}, {75, "/75"}, {143, "/143"}, {255, "/255"}, {256, "/fail"}, {-1, "/fail"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			m := lwtest.NewMonitor(t, nil)
			p, _ := newPinger(t, pingURL(m))
			p.Finish(tc.status, nil)
			if r := m.Wait(t, 1)[0]; r.Path != "/"+secret+tc.suffix {
				t.Errorf("Finish(%d) pinged %q, want /<uuid>%s", tc.status, r.Path, tc.suffix)
			}
		})
	}
}

func TestBodyCutToTheServersLimit(t *testing.T) {
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Ping-Body-Limit", "10")
		_, _ = io.WriteString(w, "OK")
	})
	p, _ := newPinger(t, pingURL(m))
	p.Start()
	m.Wait(t, 1) // the limit is learned from the start ping's answer
	p.Finish(1, []byte("early output\nthe end\n"))
	if r := m.Wait(t, 2)[1]; r.Body != "t\nthe end\n" {
		t.Errorf("body = %q, want its last 10 bytes", r.Body)
	}
}

func TestTooLargeIsSentAgainCut(t *testing.T) {
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Ping-Body-Limit", "4")
		if n == 0 {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = io.WriteString(w, "OK")
	})
	p, _ := newPinger(t, pingURL(m))
	p.Finish(0, []byte("line one\nlast"))
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	reqs := m.Wait(t, 2)
	if reqs[0].Body != "line one\nlast" || reqs[1].Body != "last" {
		t.Errorf("bodies = %q, %q; want the whole, then its last 4 bytes", reqs[0].Body, reqs[1].Body)
	}
}

func TestRetryAfter500ThenSuccess(t *testing.T) {
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "OK")
	})
	p, logs := newPinger(t, pingURL(m))
	p.Finish(0, []byte("out"))
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	reqs := m.Wait(t, 2)
	if len(reqs) != 2 || reqs[0].Path != reqs[1].Path || reqs[1].Body != "out" ||
		reqs[0].Query.Get("rid") != reqs[1].Query.Get("rid") {
		t.Errorf("want the same success ping twice, got %+v", reqs)
	}
	if strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("warned although the retry worked:\n%s", logs)
	}
	noSecret(t, logs)
}

func TestRetriesAreBoundedAndFailureIsLogged(t *testing.T) {
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	})
	p, logs := newPinger(t, pingURL(m), ping.WithRetries(2))
	p.Finish(1, nil)
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("monitor got %d attempts, want 1 + 2 retries", n)
	}
	l := logs.String()
	if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "503") || !strings.Contains(l, `"ping":"exit 1"`) {
		t.Errorf("want a warning naming the ping and the 503, got:\n%s", l)
	}
	noSecret(t, logs)
}

func TestNotFoundIsNotRetried(t *testing.T) {
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "not found", http.StatusNotFound)
	})
	p, logs := newPinger(t, pingURL(m))
	p.Finish(0, nil)
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("monitor got %d attempts, want 1: a 404 is final", n)
	}
	if l := logs.String(); !strings.Contains(l, "404 Not Found: not found") {
		t.Errorf("want the answer in the warning, got:\n%s", l)
	}
	noSecret(t, logs)
}

func TestUnreachableMonitorIsLoggedWithoutTheSecret(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	raw := pingURL(m)
	m.Close() // nothing listens there any more
	p, logs := newPinger(t, raw, ping.WithRetries(1))
	p.Finish(0, nil)
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	l := logs.String()
	if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, `"attempts":2`) {
		t.Errorf("want one warning after 2 attempts, got:\n%s", l)
	}
	noSecret(t, logs)
}

func TestHangingMonitorBlocksNothing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p, logs := newPinger(t, pingURL(m), ping.WithTimeout(time.Minute))
	t.Cleanup(func() { close(release) }) // runs first, so no cleanup hangs on the handler

	const quick = 50 * time.Millisecond // generous for -race on a busy machine
	took(t, "Start", quick, p.Start)
	m.Wait(t, 1) // the start ping is now in flight, and hangs
	took(t, "Finish", quick, func() { p.Finish(1, bytes.Repeat([]byte("x"), 10_000)) })

	const bound = 200 * time.Millisecond
	var err error
	d := took(t, "Close", bound+2*time.Second, func() { err = closeIn(t, p, bound) })
	if err == nil || !strings.Contains(err.Error(), "gave up") {
		t.Errorf("Close = %v, want it to give up", err)
	}
	if d < bound {
		t.Errorf("Close returned after %s, before its bound %s", d, bound)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("monitor got %d requests, want only the hung start", n)
	}
	if l := logs.String(); !strings.Contains(l, `"ping":"exit 1"`) || !strings.Contains(l, "exiting") {
		t.Errorf("want the unsent final ping logged, got:\n%s", l)
	}
	noSecret(t, logs)
}

func TestCloseWithoutDeadlineIsBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	p, _ := newPinger(t, pingURL(m), ping.WithTimeout(time.Minute))
	t.Cleanup(func() { close(release) })
	p.Start()
	m.Wait(t, 1)
	var err error
	d := took(t, "Close", ping.DefaultDrainTimeout+2*time.Second, func() { err = p.Close(context.Background()) })
	if err == nil || d < ping.DefaultDrainTimeout {
		t.Errorf("Close = %v after %s, want it to give up after %s", err, d, ping.DefaultDrainTimeout)
	}
}

func TestFinishCutsStartRetriesShort(t *testing.T) {
	t.Parallel()
	m := lwtest.NewMonitor(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if strings.HasSuffix(r.URL.Path, "/start") {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		_, _ = io.WriteString(w, "OK")
	})
	// The start ping would wait an hour before its retry.
	p, logs := newPinger(t, pingURL(m), ping.WithBackoff(time.Hour))
	p.Start()
	m.Wait(t, 1)
	p.Finish(0, nil)
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatalf("Close: %v (the final ping was held behind the start's retries)", err)
	}
	reqs := m.Wait(t, 2)
	if len(reqs) != 2 || reqs[1].Path != "/"+secret {
		t.Errorf("want start then success, got %+v", reqs)
	}
	if l := logs.String(); !strings.Contains(l, "final ping is due") {
		t.Errorf("want the abandoned start logged, got:\n%s", l)
	}
}

func TestRunIDPairsStartAndEnd(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	a, _ := newPinger(t, pingURL(m))
	b, _ := newPinger(t, pingURL(m))
	if !uuidRE.MatchString(a.RunID()) || a.RunID() == b.RunID() {
		t.Fatalf("run ids %q and %q: want two different UUIDs", a.RunID(), b.RunID())
	}
	// Overlapping runs.
	a.Start()
	b.Start()
	b.Finish(1, nil)
	a.Finish(0, nil)
	_ = closeIn(t, a, 5*time.Second)
	_ = closeIn(t, b, 5*time.Second)
	byRID := map[string][]string{}
	for _, r := range m.Wait(t, 4) {
		rid := r.Query.Get("rid")
		byRID[rid] = append(byRID[rid], strings.TrimPrefix(r.Path, "/"+secret))
	}
	want := map[string][]string{a.RunID(): {"/start", ""}, b.RunID(): {"/start", "/1"}}
	if fmt.Sprint(byRID) != fmt.Sprint(want) {
		t.Errorf("pings by rid = %v, want %v", byRID, want)
	}
}

func TestRunIDCanBeSetOrLeftOut(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	p, _ := newPinger(t, pingURL(m)+"?create=1", ping.WithRunID(""))
	p.Start()
	r := m.Wait(t, 1)[0]
	if _, ok := r.Query["rid"]; ok || r.Query.Get("create") != "1" {
		t.Errorf("query = %v, want create=1 kept and no rid", r.Query)
	}
}

func TestCronitor(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	if got := ping.ProtocolFor(&url.URL{Host: "cronitor.link"}); got != ping.Cronitor {
		t.Errorf("ProtocolFor(cronitor.link) = %v", got)
	}
	if got := ping.ProtocolFor(&url.URL{Host: "hc-ping.com"}); got != ping.Healthchecks {
		t.Errorf("ProtocolFor(hc-ping.com) = %v", got)
	}
	p, _ := newPinger(t, m.URL+"/p/"+secret+"/nightly?env=prod", ping.WithProtocol(ping.Cronitor))
	p.Start()
	long := strings.Repeat("é", 1500) + "the end" // 3,007 bytes
	p.Finish(3, []byte(long))
	reqs := m.Wait(t, 2)
	for i, want := range []string{"run", "fail"} {
		r := reqs[i]
		if r.Method != http.MethodGet || r.Path != "/p/"+secret+"/nightly" || r.Query.Get("state") != want ||
			r.Query.Get("series") != p.RunID() || r.Query.Get("env") != "prod" {
			t.Errorf("request %d = %s %s %v, want GET state=%s series=<rid> env=prod", i, r.Method, r.Path, r.Query, want)
		}
	}
	msg := reqs[1].Query.Get("message")
	if reqs[1].Query.Get("status_code") != "3" || len(msg) > ping.CronitorMessageLimit ||
		!strings.HasSuffix(msg, "éthe end") || !strings.HasPrefix(msg, "é") {
		t.Errorf("final ping: status_code %q, message of %d bytes starting %q", reqs[1].Query.Get("status_code"), len(msg), msg[:min(4, len(msg))])
	}
}

func TestParse(t *testing.T) {
	for _, ok := range []string{
		"https://hc-ping.com/" + secret,
		"http://hc.internal:8000/ping/" + secret + "/",
		"https://hc-ping.com/pingkey/db-backup?create=1",
		"  https://cronitor.link/p/key/job\n",
		"HTTPS://HC-PING.COM/x",
		"https://user:pass@hc.internal/ping/x",
	} {
		if _, err := ping.Parse(ok); err != nil {
			t.Errorf("Parse(%q) = %v, want it accepted", ok, err)
		}
	}
	for _, tc := range []struct{ raw, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"hc-ping.com/" + secret, "must start with http:// or https://"},
		{"ftp://hc-ping.com/" + secret, `not "ftp:"`},
		{"mailto:" + secret + "@example.com", `not "mailto:"`},
		{"https://", "no host"},
		{"https:///" + secret, "no host"},
		{"https://:8000/" + secret, "no host name"},
		{"http://user:" + secret + "@hc.internal:bad/x", "not a valid URL"},
		{"https://hc-ping.com/%zz" + secret, "not a valid URL"},
		{"https://hc ping.com/" + secret, "not a valid URL"},
	} {
		_, err := ping.Parse(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", tc.raw, err, tc.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "\n") {
			t.Errorf("Parse(%q) error %q repeats the secret or spans lines", tc.raw, msg)
		}
	}
	if _, err := ping.New("ftp://x"); err == nil {
		t.Error("New accepted an ftp URL")
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]ping.Protocol{"": ping.Auto, "auto": ping.Auto, "Healthchecks": ping.Healthchecks, "cronitor": ping.Cronitor} {
		if got, err := ping.ParseProtocol(in); err != nil || got != want {
			t.Errorf("ParseProtocol(%q) = %v, %v; want %v", in, got, err, want)
		}
		if want != ping.Auto && want.String() != strings.ToLower(in) {
			t.Errorf("%v.String() = %q", want, want.String())
		}
	}
	if _, err := ping.ParseProtocol("nagios"); err == nil {
		t.Error("ParseProtocol accepted nagios")
	}
}

func TestCallsOutOfOrderAreIgnored(t *testing.T) {
	m := lwtest.NewMonitor(t, nil)
	p, _ := newPinger(t, pingURL(m))
	p.Finish(0, nil)
	p.Start()        // after Finish: ignored
	p.Finish(1, nil) // second Finish: ignored
	if err := closeIn(t, p, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Start() // after Close: ignored, and must not panic
	p.Finish(2, nil)
	if err := closeIn(t, p, time.Second); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if reqs := m.Wait(t, 1); len(reqs) != 1 || reqs[0].Path != "/"+secret {
		t.Errorf("want exactly one success ping, got %+v", reqs)
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	for _, size := range []int{1, 7, 64} {
		tail := ping.NewTail(size)
		var all []byte
		for i := range 300 {
			chunk := bytes.Repeat([]byte{byte('a' + i%26)}, i%(2*size+1)) // empty, short, exact and oversized writes
			if n, err := tail.Write(chunk); n != len(chunk) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			all = append(all, chunk...)
			want := all[max(0, len(all)-size):]
			if got := tail.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("size %d after %d bytes: Bytes = %q, want %q", size, len(all), got, want)
			}
		}
		if tail.Written() != int64(len(all)) {
			t.Errorf("Written = %d, want %d", tail.Written(), len(all))
		}
	}
	if got := ping.NewTail(0).Bytes(); len(got) != 0 {
		t.Errorf("empty tail has %q", got)
	}
}

// Since gives the last bytes written after a mark, as they were written
// (cut anywhere), and no more than the tail kept; Last cuts Bytes shorter.
func TestTailSinceAMark(t *testing.T) {
	tail := ping.NewTail(8)
	_, _ = tail.Write([]byte("first run;"))
	mark := tail.Written()
	if got := tail.Since(mark, 100); len(got) != 0 {
		t.Errorf("Since(mark) before any write = %q, want nothing", got)
	}
	_, _ = tail.Write([]byte("ab"))
	_, _ = tail.Write([]byte("cd"))
	for _, tc := range []struct {
		mark int64
		n    int
		want string
	}{
		{mark, 100, "abcd"}, {mark, 3, "bcd"}, {mark, 0, ""}, {0, 100, "run;abcd"}, {0, 5, ";abcd"},
	} {
		if got := string(tail.Since(tc.mark, tc.n)); got != tc.want {
			t.Errorf("Since(%d, %d) = %q, want %q", tc.mark, tc.n, got, tc.want)
		}
	}
	_, _ = tail.Write([]byte("\xff\x00é"))
	if got := string(tail.Since(mark, 6)); got != "cd\xff\x00é" {
		t.Errorf("Since across the wrap = %q, want the raw bytes %q", got, "cd\xff\x00é")
	}
	if got := string(tail.Last(3)); got != "\x00é" {
		t.Errorf("Last(3) = %q, want %q", got, "\x00é")
	}
	_, _ = tail.Write([]byte("€"))
	if got := string(tail.Last(4)); got != "€" {
		t.Errorf("Last(4) = %q, want %q: the first byte kept is inside é", got, "€")
	}
}

func TestTailStartsOnAWholeCharacter(t *testing.T) {
	tail := ping.NewTail(5)
	_, _ = tail.Write([]byte("aé€z")) // a, é (2 bytes), € (3 bytes), z: 7 bytes
	// The last 5 bytes start inside é; what is left is "€z".
	if got := string(tail.Bytes()); got != "€z" {
		t.Errorf("Bytes = %q, want %q", got, "€z")
	}
}

func TestTailConcurrentWrites(t *testing.T) {
	tail := ping.NewTail(ping.DefaultTailSize)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			line := []byte(fmt.Sprintf("writer %d says hello\n", w))
			for range 500 {
				_, _ = tail.Write(line)
				_ = tail.Bytes()
			}
		})
	}
	wg.Wait()
	if got := tail.Written(); got != 8*500*int64(len("writer 0 says hello\n")) {
		t.Errorf("Written = %d", got)
	}
	if got := tail.Bytes(); len(got) != ping.DefaultTailSize {
		t.Errorf("kept %d bytes, want %d", len(got), ping.DefaultTailSize)
	}
	// Whole writes are never torn: every full line is one writer's.
	lines := strings.Split(string(tail.Bytes()), "\n")
	for _, l := range lines[1 : len(lines)-1] {
		if !regexp.MustCompile(`^writer \d says hello$`).MatchString(l) {
			t.Fatalf("torn line %q", l)
		}
	}
}

func TestWriterTeeWithExecStyleCopy(t *testing.T) {
	// As leasewrap does with --ping-output: stderr teed into the tail.
	tail := ping.NewTail(16)
	var stderr bytes.Buffer
	w := io.MultiWriter(&stderr, tail)
	_, _ = io.Copy(w, strings.NewReader(strings.Repeat("0123456789", 10)))
	if stderr.Len() != 100 || string(tail.Bytes()) != "4567890123456789" {
		t.Errorf("stderr got %d bytes, tail %q", stderr.Len(), tail.Bytes())
	}
}
