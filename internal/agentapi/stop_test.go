package agentapi

import "testing"

func TestNextStop(t *testing.T) {
	for _, tc := range []struct {
		last       Signal
		groupEmpty bool
		next       Signal
		done       bool
	}{
		{last: "", next: SIGINT},
		{last: "", groupEmpty: true, next: SIGINT},
		{last: SIGINT, next: SIGTERM},
		{last: SIGINT, groupEmpty: true, done: true},
		{last: SIGTERM, next: SIGKILL},
		{last: SIGTERM, groupEmpty: true, done: true},
		{last: SIGKILL, done: true},
		{last: SIGKILL, groupEmpty: true, done: true},
		{last: "HUP", next: SIGKILL},
		{last: "HUP", groupEmpty: true, done: true},
	} {
		next, done := NextStop(tc.last, tc.groupEmpty)
		if next != tc.next || done != tc.done {
			t.Errorf("NextStop(%q, %v) = %q, %v; want %q, %v", tc.last, tc.groupEmpty, next, done, tc.next, tc.done)
		}
	}
}

// TestNextStopEnds walks the ladder with a group that never empties: three
// signals, then done.
func TestNextStopEnds(t *testing.T) {
	var sent []Signal
	for sig, done := NextStop("", false); !done; sig, done = NextStop(sig, false) {
		sent = append(sent, sig)
		if len(sent) > 3 {
			t.Fatalf("the stop goes on: %v", sent)
		}
	}
	if len(sent) != 3 || sent[0] != SIGINT || sent[1] != SIGTERM || sent[2] != SIGKILL {
		t.Errorf("sent %v, want INT, TERM, KILL", sent)
	}
}

func TestStopLadderText(t *testing.T) {
	if got, want := StopLadderText(), "SIGINT, SIGTERM, SIGKILL, 2 s apart"; got != want {
		t.Errorf("StopLadderText() = %q, want %q", got, want)
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Signal
		ok   bool
	}{
		{"INT", SIGINT, true},
		{"sigterm", SIGTERM, true},
		{"SIGKILL", SIGKILL, true},
		{"Kill", SIGKILL, true},
		{"HUP", "HUP", false},
		{"", "", false},
	} {
		got, ok := ParseSignal(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseSignal(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
