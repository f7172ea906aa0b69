// Package examples checks the deployment examples in the repository's
// examples/ directory against the real tools: examples/supervisord.conf is run
// by supervisord with three replicas on a real PostgreSQL, and the systemd
// unit is checked with systemd-analyze verify. A missing tool skips its test,
// except under CI=true, where it fails.
package examples
