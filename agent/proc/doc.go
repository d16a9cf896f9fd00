// Package proc starts processes in sessions of their own, reaps every child
// (the agent is PID 1, or a child subreaper in tests), tells whether a
// process group still has live members, and signals a whole session.
//
// The Reaper is the process's only waiter: it reaps with wait4(-1), so
// nothing else in the same process may wait for children (no os/exec).
package proc
