// Package release is the release subcommand: an operator ends a holder's
// lease.
package release
