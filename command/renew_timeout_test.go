package command

import (
	"regexp"
	"testing"
	"time"

	"github.com/redbite/leasewrap/internal/pgtest"
)

// A database that stops answering (a blackholed connection) is said as
// such, with the bound the renewal had, and with what follows: renewals
// retried until the moment work has to stop; not as "context deadline
// exceeded". So is the release after the command was stopped.
func TestHungDatabaseRenewalSaysItDidNotAnswer(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	proxy, url := pgtest.Proxied(t, d.pool)
	p := lw(t, []string{child("ready block")}, d.args("--database-url", url, "--job", "dbhang", "--", self())...)
	p.Expect(t, "ready")
	proxy.Blackhole()
	e := p.WaitLog(t, "renewal failed")
	// The keeper gives a renewal max(--renew-interval, 1s): 1s here, or a
	// hair less once rounded on a slow machine.
	if msg, _ := e["error"].(string); !regexp.MustCompile(`^cannot renew lease "dbhang": the database did not answer within (1s|9\d\dms)$`).MatchString(msg) {
		t.Errorf("error %q, want the database named as not answering within the renewal's bound", msg)
	}
	next := regexp.MustCompile(`^retrying every 100ms; if none succeeds within \d+(\.\d+)?m?s, the lease is given up and the work under it stopped$`)
	if msg, _ := e["next"].(string); !next.MatchString(msg) {
		t.Errorf("next %q, want it to match %s", msg, next)
	}
	// The release that follows is not answered either: said the same way.
	if got := p.Wait(t, 20*time.Second); got != 75 {
		t.Errorf("exit %d, want 75", got)
	}
	e = p.WaitLog(t, "release failed; the lease will expire after its TTL")
	if msg, _ := e["error"].(string); !regexp.MustCompile(`^cannot release lease "dbhang": the database did not answer within (5s|4\.9\d\ds)$`).MatchString(msg) {
		t.Errorf("release error %q, want the database named as not answering within lease.ReleaseTimeout", msg)
	}
}
