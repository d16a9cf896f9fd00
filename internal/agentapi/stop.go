package agentapi

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// StopGrace is the wait between the signals of a stop: the reference's
// ZSH_KILL_GRACE, 2 s, enough for a trap to print its goodbye and for a
// well-behaved program to exit on SIGINT. The operator spaces the stops of
// spec.stop by it, and the agent's stop subcommand its own.
const StopGrace = 2 * time.Second

// stopLadder is the order of a stop's signals.
var stopLadder = []Signal{SIGINT, SIGTERM, SIGKILL}

// NextStop is the step of a stop after last, which found the process group
// empty or not: the signal to send a StopGrace later, or done. A stop
// begins with last "" and SIGINT; it is done once a signal found the group
// empty, or after SIGKILL. A signal not on the ladder is followed by
// SIGKILL, so that a stop always ends.
func NextStop(last Signal, groupEmpty bool) (next Signal, done bool) {
	if last == "" {
		return stopLadder[0], false
	}
	if groupEmpty || last == SIGKILL {
		return "", true
	}
	i := slices.Index(stopLadder, last)
	if i < 0 {
		return SIGKILL, false
	}
	return stopLadder[i+1], false
}

// StopLadderText is the ladder in words, for help texts: "SIGINT, SIGTERM,
// SIGKILL, 2 s apart".
func StopLadderText() string {
	names := make([]string, len(stopLadder))
	for i, s := range stopLadder {
		names[i] = s.Name()
	}
	return fmt.Sprintf("%s, %g s apart", strings.Join(names, ", "), StopGrace.Seconds())
}

// Name is the signal's name as the API and kill(1) write it: SIGINT.
func (s Signal) Name() string { return "SIG" + string(s) }

// ParseSignal reads a signal of the ladder by name, with or without SIG, in
// any case: INT, sigint, SIGINT.
func ParseSignal(name string) (Signal, bool) {
	s := Signal(strings.TrimPrefix(strings.ToUpper(name), "SIG"))
	return s, slices.Contains(stopLadder, s)
}
