// Package docscheck keeps the documentation true where a machine can tell.
// Its tests, run by .ci/docs-check, want:
//
//   - every flag and environment variable of every command's --help (the
//     help-*.txt golden files, one per subcommand) and every variable the
//     command gets from leasewrap in docs/configuration.md;
//   - every metric the exporter serves in docs/monitoring.md, and every
//     metric of --http-addr in docs/standby.md;
//   - every exit status the code declares in a row of docs/exit-status.md,
//     and no row there for a status it does not;
//   - every subcommand in the README, as `leasewrap SUB`;
//   - every relative link in the README, docs/ and examples/README.md to
//     resolve.
//
// They read the code and the golden files wherever they are in the
// repository, so that moving files between packages does not blind them.
package docscheck
