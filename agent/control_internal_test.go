package agent

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

// TestControlEndsWhenTheCallerIsGone: a control channel whose caller went
// away without closing its stdin, as a container runtime may leave an exec
// whose client is gone, ends once no request or ping came for controlIdle;
// pings keep a quiet channel open.
func TestControlEndsWhenTheCallerIsGone(t *testing.T) {
	defer func(d time.Duration) { controlIdle = d }(controlIdle)
	controlIdle = 300 * time.Millisecond
	// No daemon: a channel without events and requests never reaches it.
	c := NewClient(filepath.Join(t.TempDir(), "agent.sock"))
	ping, _ := json.Marshal(agentapi.ControlRequest{Op: agentapi.OpPing})

	in, caller := io.Pipe()
	defer caller.Close()
	done := make(chan error, 1)
	go func() { done <- c.Control(context.Background(), in, io.Discard, ControlOptions{}) }()
	for range 6 {
		if _, err := caller.Write(append(ping, '\n')); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the channel ended while pinged: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the caller is gone") {
			t.Errorf("ended with %v", err)
		}
	case <-time.After(10 * controlIdle):
		t.Fatal("the channel outlived its quiet caller")
	}
}
