package ping

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

const (
	// DefaultTimeout bounds each attempt to send a ping: connecting,
	// sending, and reading the answer's headers.
	DefaultTimeout = 5 * time.Second
	// DefaultRetries is how many more attempts a ping gets after a
	// transient failure (network error, timeout, 408, 429, 5xx).
	DefaultRetries = 2
	// DefaultBackoff is the wait before the first retry; it doubles for
	// each retry after that.
	DefaultBackoff = time.Second
	// DefaultDrainTimeout is how long Close waits for queued pings when its
	// context has no deadline.
	DefaultDrainTimeout = 2 * time.Second
	// DefaultUserAgent is the User-Agent header pings carry.
	DefaultUserAgent = "leasewrap-ping"

	// CronitorMessageLimit is the longest message Cronitor accepts; the
	// output's tail is cut to its last this many bytes.
	CronitorMessageLimit = 2000
	// maxBody bounds what a Pinger keeps of a body it is given, whatever
	// the server says it accepts.
	maxBody = 10 << 20
	// maxBackoff stops the doubling of the wait between retries.
	maxBackoff = time.Minute
)

// Protocol is the dialect a Pinger speaks.
type Protocol int

const (
	// Auto picks the protocol from the URL with ProtocolFor.
	Auto Protocol = iota
	// Healthchecks is the pinging API of healthchecks.io and its
	// self-hosted server: URL/start, URL, URL/<status>, URL/fail, rid.
	Healthchecks
	// Cronitor is Cronitor's telemetry API: URL?state=run|complete|fail,
	// series, status_code, message.
	Cronitor
)

// String returns the protocol's name as ParseProtocol accepts it.
func (p Protocol) String() string {
	switch p {
	case Healthchecks:
		return "healthchecks"
	case Cronitor:
		return "cronitor"
	default:
		return "auto"
	}
}

// ParseProtocol reads a protocol's name: auto, healthchecks or cronitor.
func ParseProtocol(s string) (Protocol, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "healthchecks":
		return Healthchecks, nil
	case "cronitor":
		return Cronitor, nil
	}
	return Auto, fmt.Errorf("ping protocol %q is not one of auto, healthchecks, cronitor", s)
}

// ProtocolFor guesses a URL's protocol from its host: Cronitor for
// cronitor.link and its subdomains (Cronitor's only documented telemetry
// host), Healthchecks for any other, since that protocol is the one
// self-hosted servers and look-alikes speak.
func ProtocolFor(u *url.URL) Protocol {
	h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if h == "cronitor.link" || strings.HasSuffix(h, ".cronitor.link") {
		return Cronitor
	}
	return Healthchecks
}

// NewRunID returns a random (version 4) UUID, the form healthchecks requires
// of a run id; it answers 400 to any other.
func NewRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 and later)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Option configures a Pinger.
type Option func(*config)

type config struct {
	log       zerolog.Logger
	client    *http.Client
	timeout   time.Duration
	retries   int
	backoff   time.Duration
	rid       string
	proto     Protocol
	userAgent string
}

// WithLogger sets where failed pings are reported (as warnings) and
// retries (at debug level). The default discards them.
func WithLogger(l zerolog.Logger) Option { return func(c *config) { c.log = l } }

// WithTimeout bounds each attempt; d <= 0 means DefaultTimeout.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithRetries sets how many more attempts a ping gets after a transient
// failure; n < 0 means none.
func WithRetries(n int) Option { return func(c *config) { c.retries = max(n, 0) } }

// WithBackoff sets the wait before the first retry, doubled for each retry
// after it; d <= 0 means DefaultBackoff.
func WithBackoff(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.backoff = d
		}
	}
}

// WithRunID sets the run id sent with every ping instead of a random one
// (for healthchecks it must be a UUID, see NewRunID). An empty id sends
// none, for a server that does not know the parameter.
func WithRunID(id string) Option { return func(c *config) { c.rid = id } }

// WithProtocol sets the protocol instead of guessing it from the URL.
func WithProtocol(p Protocol) Option { return func(c *config) { c.proto = p } }

// WithUserAgent sets the User-Agent header; empty means DefaultUserAgent.
func WithUserAgent(ua string) Option {
	return func(c *config) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// Pinger sends one run's pings to one monitor, in the background. Its
// methods are safe for concurrent use and never block on the network,
// except Close, which waits a bounded time. Call Close once the run is over.
type Pinger struct {
	cfg       config
	ownClient bool // cfg.client is ours, so Close may close its connections
	base      *url.URL
	proto     Protocol

	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc

	mu         sync.Mutex
	started    bool
	finished   bool
	closed     bool
	queue      chan event    // at most a start and a finish: never full
	superseded chan struct{} // closed by Finish
	done       chan struct{} // closed when the sender has returned

	// bodyLimit is the Ping-Body-Limit a healthchecks server last
	// announced, 0 before it did.
	bodyLimit atomic.Int64
}

type event struct {
	start  bool
	status int
	body   []byte
}

// name is how a ping is called in log lines.
func (e event) name() string {
	switch {
	case e.start:
		return "start"
	case e.status == 0:
		return "success"
	case e.status > 0 && e.status <= 255:
		return "exit " + strconv.Itoa(e.status)
	default:
		return "fail"
	}
}

// New returns a Pinger for the monitor at rawURL, which must pass Parse.
// It starts the goroutine that sends the pings; Close stops it.
func New(rawURL string, opts ...Option) (*Pinger, error) {
	u, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	c := config{
		log:       zerolog.Nop(),
		client:    nil,
		timeout:   DefaultTimeout,
		retries:   DefaultRetries,
		backoff:   DefaultBackoff,
		rid:       NewRunID(),
		userAgent: DefaultUserAgent,
	}
	for _, o := range opts {
		o(&c)
	}
	own := c.client == nil
	if own {
		c.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	p := &Pinger{
		cfg:        c,
		ownClient:  own,
		base:       u,
		proto:      c.proto,
		queue:      make(chan event, 2),
		superseded: make(chan struct{}),
		done:       make(chan struct{}),
	}
	if p.proto == Auto {
		p.proto = ProtocolFor(u)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p, nil
}

// RunID returns the run id sent with every ping ("" if none).
func (p *Pinger) RunID() string { return p.cfg.rid }

// Start queues the start ping and returns at once. Only the first call
// counts, and none after Finish or Close.
func (p *Pinger) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.finished || p.closed {
		return
	}
	p.started = true
	p.queue <- event{start: true}
}

// Finish queues the final ping and returns at once: success for status 0,
// a failure carrying the status for 1 to 255, a failure without one for
// any other value (pass -1 when there is no exit status to report). body,
// which may be nil, goes with it (for healthchecks, its last bytes up to
// the limit the server announced; for Cronitor, its last
// CronitorMessageLimit bytes, as the message); it is copied. Only the first
// call counts, and none after Close. A start ping still being retried is
// given up.
func (p *Pinger) Finish(status int, body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || p.closed {
		return
	}
	p.finished = true
	close(p.superseded)
	p.queue <- event{status: status, body: bytes.Clone(lastBytes(body, maxBody))}
}

// Close stops taking pings and waits for the queued ones to be sent, until
// ctx is done (or DefaultDrainTimeout has passed, if ctx has no deadline);
// then it cancels what is left, logs it, and returns an error that wraps
// ctx's. It never waits much past that bound. Calling it again returns nil
// once the sender has stopped.
func (p *Pinger) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	var err error
	select {
	case <-p.done:
	case <-ctx.Done():
		select {
		case <-p.done: // finished just in time
		default:
			err = fmt.Errorf("gave up waiting for pings to %s: %w", p.base.Host, ctx.Err())
		}
	}
	// Every wait in the sender also selects on p.ctx and the transport
	// honours it, so after cancel the sender returns promptly.
	p.cancel()
	<-p.done
	if p.ownClient {
		p.cfg.client.CloseIdleConnections()
	}
	return err
}

func (p *Pinger) run() {
	defer close(p.done)
	for ev := range p.queue {
		p.deliver(ev)
	}
}

// deliver sends one ping, retrying transient failures, and logs a ping that
// could not be sent.
func (p *Pinger) deliver(ev event) {
	lc := p.cfg.log.With().Str("ping", ev.name()).Str("monitor", p.base.Host)
	if p.cfg.rid != "" {
		lc = lc.Str("run_id", p.cfg.rid)
	}
	log := lc.Logger()
	var stop <-chan struct{} // what ends a wait between attempts, besides Close
	if ev.start {
		stop = p.superseded
	}
	attempt := 0
	var err error
	for {
		if p.ctx.Err() != nil {
			err = errors.New("not sent: leasewrap was exiting")
			break
		}
		attempt++
		var retry bool
		retry, err = p.attempt(ev)
		if err == nil {
			log.Debug().Int("attempt", attempt).Msg("pinged the monitor")
			return
		}
		if !retry || attempt > p.cfg.retries {
			break
		}
		wait := p.cfg.backoff
		for i := 1; i < attempt && wait < maxBackoff; i++ {
			wait *= 2
		}
		log.Debug().Err(err).Int("attempt", attempt).Dur("retry_in", wait).Msg("ping failed, retrying")
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			continue
		case <-stop:
			err = fmt.Errorf("%w (not retried: the final ping is due)", err)
		case <-p.ctx.Done():
			err = fmt.Errorf("%w (not retried: leasewrap was exiting)", err)
		}
		t.Stop()
		break
	}
	log.Warn().Err(err).Int("attempts", attempt).Msg("cannot ping the monitor")
}

// attempt sends a ping once. It reports whether a failure is worth another
// attempt. Its errors name neither the URL's path nor its query.
func (p *Pinger) attempt(ev event) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.timeout)
	defer cancel()
	req, bodyLen := p.request(ctx, ev)
	resp, err := p.cfg.client.Do(req)
	if err != nil && p.ctx.Err() != nil {
		return false, errors.New("cut short: leasewrap was exiting")
	}
	if err != nil {
		// *url.Error repeats the URL, which holds the check's secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", p.cfg.timeout)
		}
		return true, err
	}
	defer resp.Body.Close()
	// Read a little of the answer, for the error message and so the
	// connection can be reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))

	limit, _ := strconv.ParseInt(strings.TrimSpace(resp.Header.Get("Ping-Body-Limit")), 10, 64)
	if limit > 0 {
		p.bodyLimit.Store(limit)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	err = fmt.Errorf("monitor answered %s%s", resp.Status, safeSnippet(snippet))
	switch {
	case resp.StatusCode == http.StatusRequestEntityTooLarge:
		// Sent again, cut to the limit the server just announced.
		return limit > 0 && int64(bodyLen) > limit, err
	case resp.StatusCode == http.StatusRequestTimeout,
		resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode >= 500:
		return true, err
	}
	return false, err
}

// request builds the HTTP request for a ping, and says how long its body is.
func (p *Pinger) request(ctx context.Context, ev event) (*http.Request, int) {
	u := *p.base
	q := u.Query()
	method := http.MethodPost
	var body []byte
	switch p.proto {
	case Cronitor:
		method = http.MethodGet
		switch {
		case ev.start:
			q.Set("state", "run")
		case ev.status == 0:
			q.Set("state", "complete")
		default:
			q.Set("state", "fail")
		}
		if !ev.start && ev.status >= 0 && ev.status <= 255 {
			q.Set("status_code", strconv.Itoa(ev.status))
		}
		if p.cfg.rid != "" {
			q.Set("series", p.cfg.rid)
		}
		if len(ev.body) > 0 {
			q.Set("message", string(lastBytes(ev.body, CronitorMessageLimit)))
		}
	default:
		var suffix string
		switch {
		case ev.start:
			suffix = "start"
		case ev.status == 0:
		case ev.status > 0 && ev.status <= 255:
			suffix = strconv.Itoa(ev.status)
		default:
			suffix = "fail"
		}
		if suffix != "" {
			u = *u.JoinPath(suffix)
		}
		if p.cfg.rid != "" {
			q.Set("rid", p.cfg.rid)
		}
		body = lastBytes(ev.body, int(min(p.bodyLimit.Load(), maxBody)))
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		// Cannot happen: the URL passed Parse and the method is fixed.
		panic("ping: cannot build request: " + err.Error())
	}
	if method == http.MethodGet {
		req.Body, req.ContentLength = http.NoBody, 0
	} else if len(body) > 0 {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	req.Header.Set("User-Agent", p.cfg.userAgent)
	return req, len(body)
}

// safeSnippet returns ": " and an answer's body when it is a short line of
// plain text such as healthchecks sends ("not found", "invalid uuid
// format"), and "" otherwise: an error page that quotes the URL could
// repeat the check's secret.
func safeSnippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 64 || strings.ContainsAny(s, "/?=&%") {
		return ""
	}
	for _, r := range s {
		if r < ' ' || r > '~' {
			return ""
		}
	}
	return ": " + s
}
