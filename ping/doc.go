// Package ping tells an outside monitor when a job starts and how it ended,
// with the pinging API of healthchecks.io: the hosted service, its
// self-hosted server, and anything else that speaks the same protocol.
// Cronitor's telemetry API is spoken too, picked by the URL's host.
//
// # Protocol (healthchecks)
//
// Given the check's ping URL (https://hc-ping.com/<uuid>, or
// <ping-key>/<slug>, or the same path on a self-hosted server), a Pinger
// sends
//
//   - URL/start when the job starts;
//   - URL when it exited 0;
//   - URL/<status> when it exited 1 to 255 (healthchecks counts any
//     non-zero exit status as a failure and records the number);
//   - URL/fail when there is no exit status in 0..255 to report (the
//     caller passes a negative status, say when the command never ran).
//
// Every ping is a POST: a check can be set to accept POST only, and then
// counts GET and HEAD pings as ignored. The final ping's body may carry the
// tail of the job's output. healthchecks keeps the first PING_BODY_LIMIT
// bytes of a body (10,000 by default on a self-hosted server, 100,000 on
// healthchecks.io) and says so in a Ping-Body-Limit response header; a
// Pinger remembers that header and cuts the body to its last that many
// bytes, so the last lines of output, the ones that say what went wrong, are
// the ones kept. DefaultTailSize is 10,000 bytes for the same reason: a 10 KiB
// tail would lose its last 240 bytes on a default self-hosted server.
//
// Each Pinger draws a random run id (a UUID) and adds it to every ping as
// the rid query parameter, so that healthchecks pairs a start with its own
// end even when runs overlap, and computes the right duration. Any query the
// URL already has (?create=1 for slug auto-provisioning) is kept.
//
// # Protocol (Cronitor)
//
// Cronitor's URL names its state in the query, not the path:
// https://cronitor.link/p/<api-key>/<monitor>?state=run|complete|fail, with
// series=<run id> to pair events, status_code=<exit status> and
// message=<text, at most 2,000 characters>. Appending /start to such a URL
// would change the path Cronitor reads the monitor key from (and Cronitor
// creates a monitor for a key it does not know). A Cronitor
// URL is therefore recognized by its host (cronitor.link, the only
// telemetry host Cronitor documents) and spoken to in its own form, so one
// flag serves both; WithProtocol overrides the guess, for a proxy in
// front of either. Cronitor pings are GETs, and the output's tail goes in
// the message parameter, cut to its last 2,000 bytes.
//
// # Never in the way
//
// Start and Finish queue a ping and return at once; one goroutine per
// Pinger sends them in order, each attempt bounded by DefaultTimeout, up to
// DefaultRetries more attempts after a network error, a timeout, 408, 429 or
// a 5xx, waiting DefaultBackoff, then twice that, in between; a 413 that
// announces a Ping-Body-Limit is sent again, cut to it. Any other answer is
// final. A start ping still retrying when Finish is called is
// given up, so the final ping is not held behind it. Close waits a bounded
// time for what is queued, then cancels it. A ping that could not be sent is
// logged as a warning, naming the monitor's host but never the URL's path or
// query, which hold the check's secret; nothing in this package fails the
// job.
//
// # The output's tail
//
// Tail is a bounded, concurrency-safe io.Writer that keeps the last bytes
// written to it. Tee the child's stderr into it only when the user asked for
// the output in the ping: an exec.Cmd whose Stderr is not an *os.File gives
// the child a pipe and copies from it in a goroutine, so
//
//   - the child's stderr is no longer the terminal or file leasewrap was
//     given (isatty is false, so colours and progress bars change), and
//     writes may interleave differently with stdout;
//   - cmd.Wait waits for the pipe to reach end of file, which a grandchild
//     that inherited stderr can hold open long after the child exited: set
//     cmd.WaitDelay to bound that;
//   - if leasewrap dies first, the child's next write to stderr gets EPIPE
//     or SIGPIPE.
package ping
