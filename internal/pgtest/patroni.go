package pgtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redbite/leasewrap/internal/tcpproxy"
)

// Patroni's timings in the throwaway cluster: short, so that a failover
// takes seconds. A leader that cannot renew its key in etcd loses it after
// PatroniTTL; Patroni's loop runs every PatroniLoopWait.
const (
	PatroniTTL       = 10 * time.Second
	PatroniLoopWait  = time.Second
	patroniRetry     = 5 * time.Second
	patroniMaxLag    = 1 << 20 // maximum_lag_on_failover, bytes
	patroniStartWait = 90 * time.Second
)

// PatroniCluster is a throwaway high-availability PostgreSQL of the test's
// own: one etcd and PostgreSQL nodes each run by Patroni, on free loopback
// ports. Clients and replication reach each node's PostgreSQL through a TCP
// proxy (its connect_address), and each Patroni reaches etcd through
// another, so that a test can cut a node off from everyone.
type PatroniCluster struct {
	Nodes []*PatroniNode
	dir   string
	etcd  *exec.Cmd
	// etcdAddr is etcd's client address, and scope the cluster's.
	etcdAddr, scope string
	cred            *syscall.Credential
	bin             string
}

// PatroniNode is one PostgreSQL server and the Patroni that runs it.
type PatroniNode struct {
	Name string
	// Port is PostgreSQL's own port; clients use Proxy.
	Port int
	// REST is the host:port of Patroni's REST API.
	REST string
	// Proxy forwards clients and standbys to this node's PostgreSQL.
	Proxy *tcpproxy.Proxy
	// DCS forwards this node's Patroni to etcd.
	DCS *tcpproxy.Proxy
	// API forwards the other nodes' Patroni to this one's REST API (they
	// ask it how far its WAL is before one of them is promoted).
	API    *tcpproxy.Proxy
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	c      *PatroniCluster
}

// StartPatroni starts etcd and n Patroni nodes (synchronous_mode as sync)
// and waits until one is a writable primary and every other streams from
// it. Everything is stopped and removed when the test ends. Without
// patroni, etcd or PostgreSQL's server binaries the test fails under
// CI=true and skips elsewhere.
func StartPatroni(t testing.TB, n int, sync bool) *PatroniCluster {
	t.Helper()
	for _, tool := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, "%s not installed (apt-get install patroni etcd-server)", tool)
		}
	}
	bin := serverBinDir()
	if bin == "" {
		Missing(t, "PostgreSQL server binaries not found under /usr/lib/postgresql")
	}
	dir, err := os.MkdirTemp("", "leasewrap-patroni")
	if err != nil {
		t.Fatal(err)
	}
	c := &PatroniCluster{dir: dir, cred: postgresCredential(t), bin: bin}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	c.etcdAddr = c.startEtcd(t)
	c.scope = fmt.Sprintf("lw%d", freePort(t))
	for i := range n {
		c.Nodes = append(c.Nodes, c.newNode(t, i, c.scope, c.etcdAddr, sync))
	}
	t.Cleanup(c.stop)
	for _, node := range c.Nodes {
		node.Start(t)
		if node == c.Nodes[0] {
			// The first bootstraps the cluster; the others clone it.
			c.WaitWritable(t, nil, patroniStartWait)
		}
	}
	c.WaitStreaming(t, n-1, sync)
	return c
}

// startEtcd runs a single-member etcd on free ports and returns its client
// address once it answers.
func (c *PatroniCluster) startEtcd(t testing.TB) string {
	t.Helper()
	client := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	c.etcd = exec.Command("etcd", "--name", "e0", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "e0="+peer)
	log, err := os.Create(filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.etcd.Stdout, c.etcd.Stderr = log, log
	if err := c.etcd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	go func() { _ = c.etcd.Wait(); log.Close() }()
	poll(t, "etcd answering on "+client, func() (bool, error) {
		resp, err := http.Get("http://" + client + "/health")
		if err != nil {
			return false, nil //nolint:nilerr // not answering yet: poll again
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return client
}

// newNode writes node i's Patroni configuration (YAML, which JSON is).
func (c *PatroniCluster) newNode(t testing.TB, i int, scope, etcdAddr string, sync bool) *PatroniNode {
	t.Helper()
	node := &PatroniNode{Name: fmt.Sprintf("n%d", i), Port: freePort(t), REST: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		dir: filepath.Join(c.dir, fmt.Sprintf("n%d", i)), c: c}
	node.Proxy = tcpproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", node.Port))
	node.DCS = tcpproxy.Start(t, etcdAddr)
	node.API = tcpproxy.Start(t, node.REST)
	if err := os.Mkdir(node.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf, err := json.MarshalIndent(node.config(scope, sync), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(node.configPath(), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if c.cred != nil {
		for _, p := range []string{node.dir, node.configPath()} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return node
}

// config is the node's Patroni configuration: the timings above, a
// failover rather than a restart when the primary's PostgreSQL crashes
// (primary_start_timeout 0), trust authentication on loopback.
func (node *PatroniNode) config(scope string, sync bool) map[string]any {
	hba := []string{"local all all trust", "host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust"}
	return map[string]any{
		"scope": scope, "namespace": "/leasewrap/", "name": node.Name,
		"restapi": map[string]any{"listen": node.REST, "connect_address": node.API.Addr()},
		"etcd3":   map[string]any{"hosts": []string{node.DCS.Addr()}, "use_proxies": true},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": int(PatroniTTL.Seconds()), "loop_wait": int(PatroniLoopWait.Seconds()), "retry_timeout": int(patroniRetry.Seconds()),
				"maximum_lag_on_failover": patroniMaxLag, "primary_start_timeout": 0, "synchronous_mode": sync,
				"postgresql": map[string]any{"use_pg_rewind": true, "use_slots": true, "remove_data_directory_on_rewind_failure": true,
					"remove_data_directory_on_diverged_timelines": true, "parameters": map[string]any{
						"wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on", "max_wal_senders": 10,
						"max_replication_slots": 10, "wal_retrieve_retry_interval": "100ms", "fsync": "off", "max_connections": 150,
					}},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}},
		},
		"postgresql": map[string]any{
			"listen": fmt.Sprintf("127.0.0.1:%d", node.Port), "connect_address": node.Proxy.Addr(),
			"data_dir": filepath.Join(node.dir, "data"), "bin_dir": node.c.bin, "pgpass": filepath.Join(node.dir, "pgpass"),
			"authentication": map[string]any{"superuser": map[string]string{"username": "postgres"},
				"replication": map[string]string{"username": "postgres"}, "rewind": map[string]string{"username": "postgres"}},
			"pg_hba":     hba,
			"parameters": map[string]any{"unix_socket_directories": node.dir},
		},
	}
}

func (node *PatroniNode) configPath() string { return filepath.Join(node.dir, "patroni.yml") }

// Start runs the node's Patroni (again, after KillPatroni); its log goes
// to patroni.log in the node's directory.
func (node *PatroniNode) Start(t testing.TB) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(node.dir, "patroni.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patroni", node.configPath())
	cmd.Dir = node.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: node.c.cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start patroni %s: %v", node.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	node.cmd, node.exited = cmd, exited
}

// KillPatroni sends sig to the node's Patroni (SIGKILL: it dies, and its
// PostgreSQL runs on unmanaged; SIGSTOP: it freezes until SIGCONT).
// After SIGKILL it waits until the process is gone.
func (node *PatroniNode) KillPatroni(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := node.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal patroni %s: %v", node.Name, err)
	}
	if sig == syscall.SIGKILL {
		<-node.exited
	}
}

// KillPostgres SIGKILLs the node's postmaster and every process it
// started, as the kernel's OOM killer or a crash would.
func (node *PatroniNode) KillPostgres(t testing.TB) {
	t.Helper()
	pid := node.postmaster(t)
	kids := children(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill postmaster %d of %s: %v", pid, node.Name, err)
	}
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	// Until it is gone it may still answer: a writable primary found then
	// would be the dead one.
	poll(t, "postmaster "+strconv.Itoa(pid)+" gone", func() (bool, error) {
		return syscall.Kill(pid, 0) == syscall.ESRCH || zombie(pid), nil
	})
}

// zombie reports whether pid has exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// postmaster reads the postmaster's pid from postmaster.pid.
func (node *PatroniNode) postmaster(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(node.dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatalf("%s: no running PostgreSQL: %v", node.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("%s: bad postmaster.pid: %v", node.Name, err)
	}
	return pid
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			k, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, k)
		}
	}
	return out
}

// CutOff cuts the node off from clients, standbys, the other nodes'
// Patroni and etcd until Reconnect, as a network partition would.
func (node *PatroniNode) CutOff() {
	for _, p := range []*tcpproxy.Proxy{node.Proxy, node.DCS, node.API} {
		p.Cut()
	}
}

// Reconnect undoes CutOff.
func (node *PatroniNode) Reconnect() {
	for _, p := range []*tcpproxy.Proxy{node.Proxy, node.DCS, node.API} {
		p.Restore()
	}
}

// URL is the connection string to the node's PostgreSQL itself, past its
// proxy: the harness's own view, not a client's.
func (node *PatroniNode) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", node.Port)
}

// DSN is the connection string users are told to write: every node (here
// its proxy), always in the same order, target_session_attrs=read-write.
func (c *PatroniCluster) DSN() string {
	var hosts, ports []string
	for _, node := range c.Nodes {
		host, port, _ := strings.Cut(node.Proxy.Addr(), ":")
		hosts, ports = append(hosts, host), append(ports, port)
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=1 target_session_attrs=read-write",
		strings.Join(hosts, ","), strings.Join(ports, ","))
}

// stop ends every Patroni, PostgreSQL and etcd at the end of the test.
func (c *PatroniCluster) stop() {
	for _, node := range c.Nodes {
		if node.cmd != nil {
			_ = node.cmd.Process.Signal(syscall.SIGCONT)
			_ = node.cmd.Process.Kill()
			<-node.exited
		}
		data := filepath.Join(node.dir, "data")
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
			cmd := exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
			_ = cmd.Run()
		}
	}
	if c.etcd != nil && c.etcd.Process != nil {
		_ = c.etcd.Process.Kill()
	}
}

// query runs sql with args on node's PostgreSQL, past its proxy, within
// a second, scanning the row into dest.
func (node *PatroniNode) query(sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, node.URL())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}
