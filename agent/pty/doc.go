// Package pty opens pseudo-terminals and sets their size, with
// golang.org/x/sys/unix alone: the agent gives a Console job one for its
// standard streams, and its attach subcommand and the tests size theirs.
package pty
