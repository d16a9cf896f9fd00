package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// sizeQueue is a remotecommand.TerminalSizeQueue fed by a channel.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// TestAttach attaches to a console through a TTY exec of the fake API
// server, which runs the agent's attach subcommand on a terminal, as the
// kubelet does: what is typed runs, the sizes of the queue reach the
// console's terminal, and the exit status of the console's shell is the
// exec's.
func TestAttach(t *testing.T) {
	dir := startDaemon(t)
	srv, _ := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := agent.NewClient(agent.SocketPath(dir)).Start(ctx, agentapi.StartRequest{Job: "c", Command: agenttest.ConsoleShell, Console: true}); err != nil {
		t.Fatal(err)
	}
	in, typing := io.Pipe()
	defer typing.Close()
	var screen utiltesting.SyncBuffer
	sizes := make(sizeQueue, 1)
	sizes <- remotecommand.TerminalSize{Width: 100, Height: 30}
	defer close(sizes)
	done := make(chan error, 1)
	go func() {
		done <- c.Attach(ctx, pod, "c", remotecommand.StreamOptions{Stdin: in, Stdout: &screen, TerminalSizeQueue: sizes})
	}()
	await := func(re string) {
		t.Helper()
		rx := regexp.MustCompile(re)
		for !rx.MatchString(screen.String()) {
			select {
			case err := <-done:
				t.Fatalf("the attach ended: %v; screen %q", err, screen.String())
			case <-ctx.Done():
				t.Fatalf("the screen never showed %q: %q", re, screen.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(typing, line+"\r"); err != nil {
			t.Fatal(err)
		}
	}
	await("READY> ")
	// The first size may come after the prompt: ask until it is there.
	for n := 0; !strings.Contains(screen.String(), "size=30x100"); n++ {
		send(fmt.Sprintf("print size=$(stty size | tr ' ' x) try=%d", n))
		await(fmt.Sprintf(`size=\S+ try=%d`, n))
	}
	sizes <- remotecommand.TerminalSize{Width: 140, Height: 40}
	for n := 0; !strings.Contains(screen.String(), "size=40x140"); n++ {
		send(fmt.Sprintf("print size=$(stty size | tr ' ' x) again=%d", n))
		await(fmt.Sprintf(`size=\S+ again=%d`, n))
	}
	send("exit 3")
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatalf("the attach did not end: %q", screen.String())
	}
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Errorf("attach: %v, want exit status 3", err)
	}
}
