package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// StartPgBouncer runs a PgBouncer in transaction pooling mode on a free
// loopback port in front of the server at target (host:port), with trust
// authentication, until the test ends, and returns its address. Without
// pgbouncer installed the test fails under CI=true and skips elsewhere.
func StartPgBouncer(t testing.TB, target string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		Missing(t, "pgbouncer is not installed (Debian package pgbouncer)")
	}
	dir, err := os.MkdirTemp("", "leasewrap-pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	writeBouncerConfig(t, dir, addr, target)
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	// PgBouncer refuses to run as root.
	if cred := postgresCredential(t); cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() { // what PgBouncer said, for a test that failed through it
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("pgbouncer log:\n%s", log)
		}
	})
	awaitListening(t, filepath.Join(dir, "log"), addr)
	return addr
}

// PgBouncerPoolSize is how many server connections StartPgBouncer's
// PgBouncer opens at most for one database and user: as many clients,
// each in a transaction, hold every one of them.
const PgBouncerPoolSize = 20

// writeBouncerConfig writes pgbouncer.ini and its users file into dir.
//
// server_login_retry is 1 s, not the default 15 s: a login that fails
// while the shared test server is at max_connections (a busy run of the
// whole suite) makes PgBouncer refuse every new client at once for that
// long, which a test waiting 15 s for a standby's take cannot tell from a
// hung pooler.
func writeBouncerConfig(t testing.TB, dir, addr, target string) {
	t.Helper()
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatal(err)
	}
	listenHost, listenPort, _ := net.SplitHostPort(addr)
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = %s
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = %d
server_login_retry = 1
logfile = %s
`, host, port, listenHost, listenPort, filepath.Join(dir, "users.txt"), PgBouncerPoolSize, filepath.Join(dir, "log"))
	for name, content := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitListening waits until PgBouncer's own log says it listens on addr
// and a dial gets through: a dial alone could reach a stranger that took
// the port first.
func awaitListening(t testing.TB, logFile, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		log, _ := os.ReadFile(logFile)
		if bytes.Contains(log, []byte("listening on "+addr)) {
			if conn, err := net.Dial("tcp", addr); err == nil {
				conn.Close()
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen on %s:\n%s", addr, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
