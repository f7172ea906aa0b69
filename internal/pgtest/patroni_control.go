package pgtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WaitWritable waits until a node other than not (nil: any) is the
// primary and commits a transaction that writes (with synchronous_mode,
// one its synchronous standby confirmed), and returns it: the moment
// Patroni's failover or switchover is over for a client. The cluster's
// own view, past the proxies.
func (c *PatroniCluster) WaitWritable(t testing.TB, not *PatroniNode, within time.Duration) *PatroniNode {
	t.Helper()
	node, _ := c.WaitPromoted(t, not, within)
	return node
}

// WaitPromoted is WaitWritable, and also says since when the node it
// returns can have been writable: the start of the last round of looks
// that found no node writable (zero if the first round found one). A
// write found on that node and made since then was made on it as the
// primary.
func (c *PatroniCluster) WaitPromoted(t testing.TB, not *PatroniNode, within time.Duration) (_ *PatroniNode, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		round := time.Now()
		for _, node := range c.Nodes {
			if node != not && node.writable() {
				return node, since
			}
		}
		since = round
		if time.Now().After(deadline) {
			t.Fatalf("no writable primary (other than %s) within %s\n%s\n%s", nameOf(not), within, c.Status(), c.logTails())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writable reports whether node's PostgreSQL is out of recovery and has
// just committed a transaction id.
func (node *PatroniNode) writable() bool {
	var recovery bool
	if err := node.query(`SELECT pg_is_in_recovery()`, nil, &recovery); err != nil || recovery {
		return false
	}
	var xid int64
	return node.query(`SELECT txid_current()`, nil, &xid) == nil
}

// Streams reports whether a standby streams from node's PostgreSQL, and
// whether the node is still a primary.
func (node *PatroniNode) Streams() (streams, primary bool) {
	var n int
	var standby bool
	err := node.query(`SELECT count(*), pg_is_in_recovery() FROM pg_stat_replication
  WHERE state = 'streaming' AND application_name <> 'pg_basebackup'`, nil, &n, &standby)
	return err == nil && n > 0, err != nil || !standby
}

func nameOf(node *PatroniNode) string {
	if node == nil {
		return "none"
	}
	return node.Name
}

// WaitStreaming waits until the primary has standbys streaming from it
// and, when sync is set, one of them synchronous (none otherwise), and
// returns the primary. After a fault it is how a test knows the cluster
// is whole again: the old primary rewound and following.
func (c *PatroniCluster) WaitStreaming(t testing.TB, standbys int, sync bool) *PatroniNode {
	t.Helper()
	primary := c.WaitWritable(t, nil, patroniStartWait)
	want := 0
	if sync {
		want = 1
	}
	deadline := time.Now().Add(patroniStartWait)
	unstickAt := time.Now().Add(patroniStartWait / 4)
	for {
		var streaming, synchronous int
		// Patroni names each standby's connection after its member; a base
		// backup under way streams too, as pg_basebackup.
		err := primary.query(`SELECT count(*) FILTER (WHERE state = 'streaming'),
  count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) FROM pg_stat_replication
  WHERE application_name <> 'pg_basebackup'`, nil, &streaming, &synchronous)
		if err == nil && streaming == standbys && synchronous == want && c.allRunning(sync) {
			return primary
		}
		if time.Now().After(unstickAt) {
			unstickAt = time.Now().Add(patroniStartWait / 4)
			c.unstick(t, primary, err == nil && streaming == standbys && synchronous == want)
			primary = c.WaitWritable(t, nil, patroniStartWait)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d standbys streaming (%d synchronous), want %d (%d) within %s\n%s\n%s",
				primary.Name, streaming, synchronous, standbys, want, patroniStartWait, c.Status(), c.logTails())
		}
		time.Sleep(50 * time.Millisecond)
		if err != nil {
			primary = c.WaitWritable(t, nil, patroniStartWait)
		}
	}
}

// Switchover asks Patroni (POST /switchover on the leader's REST API, as
// patronictl switchover --force does) to hand the primary role from
// leader to a healthy standby of its choosing, and returns once Patroni
// says it is done.
func (c *PatroniCluster) Switchover(t testing.TB, leader *PatroniNode) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"leader": leader.Name})
	code, out := leader.rest(t, http.MethodPost, "/switchover", body)
	if code != http.StatusOK {
		t.Fatalf("switchover from %s: %d %s", leader.Name, code, out)
	}
}

// SetSynchronous turns Patroni's synchronous_mode on or off (PATCH /config,
// as patronictl edit-config does) and waits until the primary has all its
// standbys streaming, one synchronous when on.
func (c *PatroniCluster) SetSynchronous(t testing.TB, on bool) {
	t.Helper()
	body, _ := json.Marshal(map[string]bool{"synchronous_mode": on})
	primary := c.WaitWritable(t, nil, patroniStartWait)
	if code, out := primary.rest(t, http.MethodPatch, "/config", body); code != http.StatusOK {
		t.Fatalf("set synchronous_mode %t: %d %s", on, code, out)
	}
	c.WaitStreaming(t, len(c.Nodes)-1, on)
}

// Revive undoes a fault on node without waiting: its proxies let
// everything through again, and its Patroni runs again (SIGCONT, or
// started anew after SIGKILL). WaitStreaming tells when the cluster is
// whole.
func (node *PatroniNode) Revive(t testing.TB) {
	t.Helper()
	node.Reconnect()
	select {
	case <-node.exited:
		node.Start(t)
	default:
		_ = node.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// unstick gets a cluster going that does not become whole by itself
// (seen with Patroni 3.0.2 after its primary's Patroni was frozen or cut
// off from etcd). A node left on a timeline the primary never had (a
// promotion Patroni undid) never streams again: it is rebuilt. When
// PostgreSQL has its synchronous standby but Patroni never records it
// ("Synchronous replication key updated by someone else", every loop),
// Patroni would promote no one if the primary failed: the key is deleted
// from etcd, for the primary's Patroni to write anew, and that Patroni
// restarted, its PostgreSQL running on (a restart alone did not always
// do).
func (c *PatroniCluster) unstick(t testing.TB, primary *PatroniNode, streaming bool) {
	t.Helper()
	if !streaming {
		c.reinitStrays(t, primary)
		return
	}
	t.Logf("Patroni has not recorded %s's synchronous standby: deleting its sync key (%s) and restarting its Patroni",
		primary.Name, c.deleteSyncKey())
	primary.KillPatroni(t, syscall.SIGKILL)
	primary.Start(t)
}

// deleteSyncKey deletes the cluster's sync key through etcd's v3 JSON
// gateway, and says how that went.
func (c *PatroniCluster) deleteSyncKey() string {
	key := base64.StdEncoding.EncodeToString([]byte("/leasewrap/" + c.scope + "/sync"))
	resp, err := http.Post("http://"+c.etcdAddr+"/v3/kv/deleterange", "application/json", strings.NewReader(`{"key":"`+key+`"}`))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.Status + " " + strings.TrimSpace(string(body))
}

// reinitStrays asks Patroni to rebuild (POST /reinitialize, as patronictl
// reinit does) every node that does not stream from primary.
func (c *PatroniCluster) reinitStrays(t testing.TB, primary *PatroniNode) {
	t.Helper()
	for _, node := range c.Nodes {
		var n int
		err := primary.query(`SELECT count(*) FROM pg_stat_replication WHERE application_name = $1`, []any{node.Name}, &n)
		if node == primary || err != nil || n > 0 {
			continue
		}
		code, out := node.rest(t, http.MethodPost, "/reinitialize", []byte(`{"force": true}`))
		t.Logf("%s does not stream from %s: reinitialized (%d %s)", node.Name, primary.Name, code, out)
	}
}

// allRunning reports whether Patroni lists every node as running and,
// when sync is set, one as its synchronous standby: Patroni records that
// in etcd only after PostgreSQL made the standby synchronous, and until
// then it would promote no one if the primary failed.
func (c *PatroniCluster) allRunning(sync bool) bool {
	var view struct {
		Members []struct{ State, Role string }
	}
	if err := json.Unmarshal([]byte(c.Status()), &view); err != nil || len(view.Members) != len(c.Nodes) {
		return false
	}
	synchronous := 0
	for _, m := range view.Members {
		if m.State != "running" && m.State != "streaming" {
			return false
		}
		if m.Role == "sync_standby" {
			synchronous++
		}
	}
	return synchronous == 1 || !sync && synchronous == 0
}

// Status is Patroni's view of the cluster (GET /cluster on the first node
// that answers), for failure messages.
func (c *PatroniCluster) Status() string {
	for _, node := range c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+node.REST+"/cluster", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return string(b)
	}
	return "(no Patroni answers)"
}

// logTails is the end of every node's Patroni log, for failure messages:
// a Patroni that cannot start says why only there.
func (c *PatroniCluster) logTails() string {
	var b strings.Builder
	for _, node := range c.Nodes {
		log, _ := os.ReadFile(filepath.Join(node.dir, "patroni.log"))
		fmt.Fprintf(&b, "--- %s patroni.log (end):\n%s\n", node.Name, log[max(0, len(log)-3000):])
	}
	return b.String()
}

// rest calls node's REST API and returns the status and body.
func (node *PatroniNode) rest(t testing.TB, method, path string, body []byte) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patroniStartWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+node.REST+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, node.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(b))
}
