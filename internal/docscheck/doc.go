// Package docscheck keeps the documentation true where a machine can tell:
// its tests check that docs/configuration.md names every flag and
// environment variable of every command's --help (the golden files in
// testdata/), that docs/monitoring.md and docs/standby.md name every metric
// leasewrap serves, that the README names every subcommand, and that every
// relative link in the README, docs/ and examples/README.md resolves.
package docscheck
