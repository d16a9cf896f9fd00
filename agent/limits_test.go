package agent_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
)

// Commands up to the API's limit start and run, in both modes, whatever
// JSON makes of them: plain ASCII, and shell code whose <, > and & JSON
// escapes as six bytes each.
func TestLongestCommands(t *testing.T) {
	d := startDaemon(t)
	for _, mode := range []struct {
		name     string
		stateful bool
	}{{"fork", false}, {"stateful", true}} {
		for name, command := range map[string]func(int) (string, string){
			"plain": agenttest.PlainCommand, "escaped": agenttest.EscapedCommand,
		} {
			t.Run(mode.name+"/"+name, func(t *testing.T) {
				cmd, want := command(agenttest.MaxCommand)
				if len(cmd) != agenttest.MaxCommand {
					t.Fatalf("command of %d bytes", len(cmd))
				}
				id := mode.name + "-" + name
				req := agentapi.StartRequest{Job: id, Command: cmd, Stateful: mode.stateful}
				if _, err := d.c.Start(ctxFor(t, waitShort), req); err != nil {
					t.Fatalf("start: %v", err)
				}
				var out bytes.Buffer
				if _, err := d.c.Follow(ctxFor(t, waitLong), id, 0, &out); err != nil {
					t.Fatalf("follow: %v", err)
				}
				if out.String() != want {
					t.Errorf("output of %d bytes, want %d", out.Len(), len(want))
				}
				e, err := d.waitEvent(waitLong, func(e agentapi.Event) bool { return e.Type == agentapi.EventExited && e.Job == id })
				if err != nil {
					t.Fatalf("waiting for the exit: %v", err)
				}
				if c := code(t, e); c != 0 {
					t.Errorf("exit %d, want 0", c)
				}
			})
		}
	}
}

// A request past the daemon's bound is answered with an error, at once.
func TestOversizedRequest(t *testing.T) {
	d := startDaemon(t)
	conn, err := net.Dial("unix", agent.SocketPath(d.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitShort))
	go func() {
		// Never a newline: only the bound ends the request.
		_, _ = conn.Write([]byte(`{"op":"start","start":{"job":"big","command":"`))
		_, _ = conn.Write([]byte(strings.Repeat("x", 4<<20)))
	}()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil || strings.Contains(b.String(), "\n") {
			break
		}
	}
	if !strings.Contains(b.String(), `"error":"read request:`) || !strings.Contains(b.String(), "too large") {
		t.Errorf("reply %q, want a request-too-large error", b.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if _, err := d.c.Signal(ctx, "big", agentapi.SIGINT); err == nil {
		t.Error("the oversized start ran a job")
	}
}
