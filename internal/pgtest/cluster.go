package pgtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Cluster is a throwaway PostgreSQL server a test starts from the machine's
// installed binaries, so that it can restart it without touching the shared
// one. When the test runs as root the server runs as the postgres user.
type Cluster struct {
	Port int
	dir  string
	bin  string
	cred *syscall.Credential
}

// StartCluster initialises and starts a cluster on a free loopback port with
// trust authentication; it is stopped and removed when the test ends. Without
// PostgreSQL's server binaries the test fails under CI=true and skips
// elsewhere.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c := newCluster(t)
	c.run(t, "initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	c.pgctl(t, "start")
	return c
}

// newCluster prepares a directory and a free port for a server, without
// initialising it. The server, if one runs there when the test ends, is
// stopped and the directory removed.
func newCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := serverBinDir()
	if bin == "" {
		Missing(t, "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql")
	}
	c := &Cluster{bin: bin, Port: freePort(t)}
	dir, err := os.MkdirTemp("", "leasewrap-pg")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if c.cred = postgresCredential(t); c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if c.Running() {
			c.run(t, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
		}
	})
	return c
}

// URL is the cluster's connection string (database postgres).
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
}

// Addr is the cluster's host:port.
func (c *Cluster) Addr() string { return fmt.Sprintf("127.0.0.1:%d", c.Port) }

// Restart stops the server (fast shutdown: sessions are cut) and starts it
// again, waiting until it accepts connections.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.pgctl(t, "restart", "-m", "fast")
}

// Stop shuts the server down (fast: sessions are cut).
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
}

// Crash stops the server like a power cut (immediate shutdown: no
// checkpoint, sessions and replication connections cut, WAL not yet sent to
// a standby never will be).
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
}

// Start starts a stopped server and waits until it accepts connections.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	c.pgctl(t, "start")
}

// Running reports whether a server runs on the cluster's data directory.
func (c *Cluster) Running() bool {
	_, err := os.Stat(filepath.Join(c.data(), "postmaster.pid"))
	return err == nil
}

// Promote ends a standby's recovery and waits until it accepts writes.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-w", "-t", "60", "promote")
}

// rebuildFrom replaces the cluster's data with a base backup of the server
// at host:port, configured (-R) to stream from there as a standby, and
// starts it. The cluster must be stopped.
func (c *Cluster) rebuildFrom(t testing.TB, host string, port int) {
	t.Helper()
	if c.Running() {
		t.Fatalf("cannot rebuild the cluster on port %d: it is running", c.Port)
	}
	if err := os.RemoveAll(c.data()); err != nil {
		t.Fatal(err)
	}
	c.run(t, "pg_basebackup", "-D", c.data(), "-h", host, "-p", strconv.Itoa(port), "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync")
	c.pgctl(t, "start")
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgctl(t testing.TB, action string, extra ...string) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=150", c.Port, c.dir)
	c.run(t, "pg_ctl", append([]string{"-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o", opts, action}, extra...)...)
}

func (c *Cluster) run(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		log, lerr := os.ReadFile(filepath.Join(c.dir, "log"))
		if errors.Is(lerr, os.ErrNotExist) {
			log = []byte("(no server log)")
		}
		t.Fatalf("%s %v: %v\n%s\n%s", name, args, err, out, log)
	}
}

// postgresCredential is the postgres user's, when the test runs as root:
// PostgreSQL and PgBouncer refuse to run as root. It is nil otherwise.
func postgresCredential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs a postgres user for test servers: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// serverBinDir finds the newest installed PostgreSQL's server binaries.
func serverBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d
		}
	}
	return ""
}

// freePort returns a loopback port that is free now, below the kernel's
// ephemeral range: a port from that range, once closed, can be handed to
// any outgoing connection or another process's bind to port 0 before the
// server that was to listen on it binds, and a readiness check would then
// find a stranger answering there.
func freePort(t testing.TB) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return 0
}
