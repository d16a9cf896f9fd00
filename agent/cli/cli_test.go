package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/agent/cli"
	"shelljob.dev/shelljob/internal/agentapi"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

type result struct {
	code           int
	stdout, stderr string
}

// run runs a subcommand in this process, as an exec in the pod would.
func run(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args[:1:1], append([]string{"--spool-dir", dir}, args[1:]...)...)
	code := cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func TestSubcommands(t *testing.T) {
	dir := agenttest.Serve(t, "--head-bytes=10", "--tail-bytes=10", "--chunk-bytes=4")

	r := run(t, dir, `{"job":"j1","command":"seq 1 20"}`, "start")
	var resp agentapi.StartResponse
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &resp) != nil || resp.PGID <= 0 {
		t.Fatalf("start: %+v", r)
	}
	run(t, dir, "", "follow", "--job", "j1") // returns once the job ended
	// 51 bytes: the first 10 and the last 10 are kept.
	r = run(t, dir, "", "follow", "--job", "j1")
	want := "1\n2\n3\n4\n5\n" + agentapi.GapLine(31) + "\n18\n19\n20\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("follow: %+v, want %q", r, want)
	}
	r = run(t, dir, "", "follow", "--job", "j1", "--offset", "45", "--framed")
	var text bytes.Buffer
	n, err := agentapi.ReadFollow(strings.NewReader(r.stdout), 45, &text)
	if r.code != 0 || !strings.HasPrefix(r.stdout, agentapi.FollowMagic) || err != nil || n != 51 || text.String() != "19\n20\n" {
		t.Errorf("framed follow: %+v: %q, %d, %v", r, text.String(), n, err)
	}
	r = run(t, dir, "", "signal", "--job", "j1", "--signal", "TERM")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"groupEmpty":true}` {
		t.Errorf("signal: %+v", r)
	}

	r = run(t, dir, `{"job":"j2","command":"trap '' INT; echo ready; exec sleep 100"}`, "start")
	if r.code != 0 {
		t.Fatalf("start: %+v", r)
	}
	agenttest.WaitOutput(t, agent.NewClient(agent.SocketPath(dir)), "j2", "ready\n")
	r = run(t, dir, "", "stop", "--job", "j2", "--step", "100ms")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], `{"signal":"INT","groupEmpty":false}`) ||
		!strings.HasPrefix(lines[1], `{"signal":"TERM"`) {
		t.Errorf("stop: %+v", r)
	}
}

func TestExitCodes(t *testing.T) {
	dir := agenttest.Serve(t)
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"unknown subcommand", "", []string{"frobnicate"}, agentapi.ExitUsage, "usage:"},
		{"no job", "", []string{"signal", "--signal", "INT"}, agentapi.ExitUsage, "--job is required"},
		{"stray argument", "", []string{"get-files", "--job", "x", "extra"}, agentapi.ExitUsage, "unexpected arguments"},
		{"bad start request", "{", []string{"start"}, agentapi.ExitUsage, "read request"},
		{"start request too large", `{"job":"big","command":"` + strings.Repeat("x", 2<<20) + `"}`, []string{"start"},
			agentapi.ExitUsage, "too large"},
		{"unknown job", "", []string{"signal", "--job", "nosuch", "--signal", "INT"}, agentapi.ExitUnknownJob, "unknown job"},
		{"unknown follow", "", []string{"follow", "--job", "nosuch"}, agentapi.ExitUnknownJob, "unknown job"},
		{"newer caller", "", []string{"ping", "--protocol", strconv.Itoa(agentapi.ProtocolVersion + 1)}, agentapi.ExitProtocol, "protocol"},
		{"bad signal", "", []string{"signal", "--job", "nosuch", "--signal", "HUP"}, agentapi.ExitUsage, "INT, TERM or KILL"},
	}
	for _, tc := range tests {
		var r result
		if tc.name == "unknown subcommand" {
			var out, errb bytes.Buffer
			r = result{cli.Main(tc.args, strings.NewReader(""), &out, &errb), out.String(), errb.String()}
		} else {
			r = run(t, dir, tc.stdin, tc.args...)
		}
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if r := run(t, t.TempDir(), "", "ping"); r.code != 1 || !strings.Contains(r.stderr, "reach agent") {
		t.Errorf("ping without a daemon: %+v", r)
	}
	r := run(t, dir, `{"job":"s","command":"true","stateful":true,"shell":"sh"}`, "start")
	if r.code != 1 || !strings.Contains(r.stderr, "need zsh") {
		t.Errorf("stateful in sh: %+v", r)
	}
	r = run(t, dir, `{"job":"sc","command":"true","stateful":true,"console":true}`, "start")
	if r.code != 1 || !strings.Contains(r.stderr, "Stateful or a Console, not both") {
		t.Errorf("stateful console: %+v", r)
	}
	if r = run(t, dir, "", "attach"); r.code != agentapi.ExitUsage || !strings.Contains(r.stderr, "--job is required") {
		t.Errorf("attach without a job: %+v", r)
	}
}

// TestEventsEndWithStdin: an events subcommand whose exec went away (its
// stdin closed) ends instead of lingering in the pod.
func TestEventsEndWithStdin(t *testing.T) {
	dir := agenttest.Serve(t)
	c := agent.NewClient(agent.SocketPath(dir))
	if _, err := c.Start(context.Background(), agentapi.StartRequest{Job: "j", Command: "true"}); err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int)
	go func() {
		done <- cli.Main([]string{"events", "--spool-dir", dir, "--watch-stdin"}, stdinR, outW, io.Discard)
		outW.Close()
	}()
	dec := json.NewDecoder(outR)
	for {
		var e agentapi.Event
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		if e.Type == agentapi.EventSynced {
			break
		}
	}
	stdinW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("events did not end when stdin closed")
	}
}

// A command at the API's limit (65,536 bytes) starts through the start
// subcommand, as the operator's exec sends it, even when JSON escapes most
// of it (<, > and & take six bytes each).
func TestStartLongestCommand(t *testing.T) {
	dir := agenttest.Serve(t)
	cmd, want := agenttest.EscapedCommand(agenttest.MaxCommand)
	req, err := json.Marshal(agentapi.StartRequest{Job: "long", Command: cmd})
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, string(req), "start"); r.code != 0 {
		t.Fatalf("start of a %d-byte request: %+v", len(req), r)
	}
	r := run(t, dir, "", "follow", "--job", "long")
	if r.code != 0 || r.stdout != want {
		t.Errorf("follow: exit %d, %d bytes of output, want %d", r.code, len(r.stdout), len(want))
	}
}
