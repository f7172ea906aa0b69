// Package cmdutil holds what every leasewrap subcommand shares: exit
// statuses and usage errors, the settings and how they are read and refused,
// what to do about the facts lease refuses a run for (Advised),
// the flags declared once, the database connection (named in logs without
// its password, see internal/redact), the logger, and the store a
// subcommand opens.
package cmdutil
