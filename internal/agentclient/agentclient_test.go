package agentclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	utilexec "k8s.io/client-go/util/exec"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
)

var pod = types.NamespacedName{Namespace: "shell", Name: "shell-abc-0"}

func newClient(t *testing.T, host string, opts Options) *Client {
	t.Helper()
	c, err := New(&rest.Config{Host: host}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExecURL(t *testing.T) {
	c := newClient(t, "https://api.example:6443", Options{Container: "agent"})
	u := c.execURL(pod, argv(agentapi.CmdFollow, flag(agentapi.FlagJob, "uid-1"), agentapi.FlagFramed), false)
	if u.Path != "/api/v1/namespaces/shell/pods/shell-abc-0/exec" {
		t.Errorf("path %s", u.Path)
	}
	q := u.Query()
	want := []string{agentapi.AgentPath, "follow", "--protocol=" + strconv.Itoa(agentapi.ProtocolVersion), "--job=uid-1", "--framed"}
	if !slices.Equal(q["command"], want) {
		t.Errorf("command %q, want %q", q["command"], want)
	}
	if q.Get("container") != "agent" || q.Get("stdout") != "true" || q.Get("stderr") != "true" || q.Has("stdin") {
		t.Errorf("query %v", q)
	}
	if u := c.execURL(pod, argv(agentapi.CmdStart), true); u.Query().Get("stdin") != "true" {
		t.Errorf("start without stdin: %v", u.Query())
	}
}

func TestExecError(t *testing.T) {
	ctx := context.Background()
	exit := func(code int) error {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	tests := map[string]struct {
		err    error
		stderr string
		is     error
		text   string
	}{
		"unknown job": {
			err: exit(agentapi.ExitUnknownJob), stderr: "shelljob-agent signal: job x: unknown job\n",
			is: agentapi.ErrUnknownJob, text: "agent signal in pod shell/shell-abc-0: shelljob-agent signal: job x: unknown job: unknown job",
		},
		"busy":     {err: exit(agentapi.ExitBusy), stderr: "busy\n", is: agentapi.ErrBusy},
		"started":  {err: exit(agentapi.ExitStarted), is: agentapi.ErrStarted},
		"protocol": {err: exit(agentapi.ExitProtocol), is: agentapi.ErrProtocol},
		"other exit": {
			err: exit(1), stderr: "warning\nshelljob-agent signal: reach agent: no such file\n",
			text: "agent signal in pod shell/shell-abc-0: exit 1: shelljob-agent signal: reach agent: no such file",
		},
		"transport": {
			err:  errors.New(`pods "shell-abc-0" not found`),
			text: `agent signal in pod shell/shell-abc-0: pods "shell-abc-0" not found`,
		},
	}
	for name, tc := range tests {
		got := execError(ctx, pod, "signal", tc.err, tc.stderr)
		if tc.is != nil && !errors.Is(got, tc.is) {
			t.Errorf("%s: %v is not %v", name, got, tc.is)
		}
		if tc.text != "" && got.Error() != tc.text {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, tc.text)
		}
		if !strings.Contains(got.Error(), pod.String()) {
			t.Errorf("%s: %v does not name the pod", name, got)
		}
	}
	if execError(ctx, pod, "start", nil, "noise") != nil {
		t.Error("no error became one")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := execError(cancelled, pod, "follow", errors.New("stream reset"), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

// TestOverWebSocket drives every call through a fake API server's exec
// endpoint, which runs the real agent subcommands against a real daemon.
func TestOverWebSocket(t *testing.T) {
	dir := startDaemon(t, "--head-bytes=100", "--tail-bytes=100", "--chunk-bytes=16")
	srv, _ := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()

	// Events, opened first: they must report what follows.
	evctx, stopEvents := context.WithCancel(ctx)
	var mu sync.Mutex
	var events []agentapi.Event
	exited := map[string]chan agentapi.Event{"seq": make(chan agentapi.Event, 1), "sleep": make(chan agentapi.Event, 1)}
	synced := make(chan struct{})
	evDone := make(chan error, 1)
	go func() {
		evDone <- c.Events(evctx, pod, func(e agentapi.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			switch {
			case e.Type == agentapi.EventSynced:
				close(synced)
			case e.Type == agentapi.EventExited && exited[e.Job] != nil:
				exited[e.Job] <- e
			}
		})
	}()
	select {
	case <-synced:
	case <-ctx.Done():
		t.Fatal("no synced event")
	}

	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	_ = tw.WriteHeader(&tar.Header{Name: "in.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("in"))
	tw.Close()
	if err := c.PutFiles(ctx, pod, "seq", &in); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "seq", Command: `cat "$SHELLJOB_OUT/in.txt" > "$SHELLJOB_OUT/out.txt"; seq 1 100`})
	if err != nil {
		t.Fatal(err)
	}
	if resp.PGID <= 0 {
		t.Errorf("start: %+v", resp)
	}
	if again, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "seq", Command: "exit 1"}); err != nil || again != resp {
		t.Errorf("second start: %+v, %v", again, err)
	}
	e := <-exited["seq"]
	if e.ExitCode == nil || *e.ExitCode != 0 || e.OutputBytes != 292 || e.DroppedBytes != 92 {
		t.Errorf("exited: %+v", e)
	}

	var seq strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintln(&seq, i)
	}
	all := seq.String()
	var out bytes.Buffer
	n, err := c.Follow(ctx, pod, "seq", 0, &out)
	if want := all[:100] + agentapi.GapLine(92) + all[192:]; err != nil || n != 292 || out.String() != want {
		t.Errorf("follow: %d, %v\n%q\nwant\n%q", n, err, out.String(), want)
	}
	out.Reset()
	if n, err := c.Follow(ctx, pod, "seq", 250, &out); err != nil || n != 292 || out.String() != all[250:] {
		t.Errorf("follow from 250: %d, %v, %q", n, err, out.String())
	}

	var files bytes.Buffer
	if err := c.GetFiles(ctx, pod, "seq", 0, &files); err != nil {
		t.Fatal(err)
	}
	// --offset: the ended job's stream from 700 on.
	var rest bytes.Buffer
	if err := c.GetFiles(ctx, pod, "seq", 700, &rest); err != nil || !bytes.Equal(rest.Bytes(), files.Bytes()[700:]) {
		t.Errorf("files from 700: %d bytes, %v; want the stream's last %d", rest.Len(), err, files.Len()-700)
	}
	got := map[string]string{}
	tr := tar.NewReader(&files)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if got["in.txt"] != "in" || got["out.txt"] != "in" || len(got) != 2 {
		t.Errorf("files %v", got)
	}
	if err := c.PutFiles(ctx, pod, "seq", bytes.NewReader(in.Bytes())); !errors.Is(err, agentapi.ErrStarted) {
		t.Errorf("put files after the start: %v", err)
	}

	// A follow of a running job, and its stop.
	// exec: no fork for a stop to race with.
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "sleep", Command: "echo go; exec sleep 100"}); err != nil {
		t.Fatal(err)
	}
	followed := make(chan string)
	saw := &seen{want: "go\n", found: make(chan struct{})}
	go func() {
		_, err := c.Follow(ctx, pod, "sleep", 0, saw)
		followed <- fmt.Sprint(saw.b.String(), err)
	}()
	select {
	case <-saw.found:
	case <-ctx.Done():
		t.Fatal("live follow never got the output")
	}
	if _, err := c.Signal(ctx, pod, "sleep", agentapi.SIGINT); err != nil {
		t.Fatal(err)
	}
	e = <-exited["sleep"]
	if e.ExitCode == nil || *e.ExitCode != 130 {
		t.Errorf("stopped: %+v", e)
	}
	if f := <-followed; f != "go\n<nil>" {
		t.Errorf("live follow gave %q", f)
	}
	if r, err := c.Signal(ctx, pod, "sleep", agentapi.SIGKILL); err != nil || !r.GroupEmpty {
		t.Errorf("signal after the end: %+v, %v", r, err)
	}

	_, err = c.Signal(ctx, pod, "nosuch", agentapi.SIGINT)
	if !errors.Is(err, agentapi.ErrUnknownJob) || !strings.Contains(err.Error(), pod.String()) {
		t.Errorf("unknown job: %v", err)
	}
	other := types.NamespacedName{Namespace: "shell", Name: "gone"}
	if _, err := c.Follow(ctx, other, "seq", 0, io.Discard); err == nil || !strings.Contains(err.Error(), other.String()) {
		t.Errorf("missing pod: %v", err)
	}

	stopEvents()
	if err := <-evDone; !errors.Is(err, context.Canceled) {
		t.Errorf("events ended with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, e := range events {
		if e.Type != agentapi.EventStatus {
			kinds = append(kinds, string(e.Type)+":"+e.Job)
		}
	}
	want := []string{"worker:", "synced:", "started:seq", "exited:seq", "started:sleep", "exited:sleep"}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// A command at the API's limit, 65,536 bytes that JSON escapes mostly as
// six bytes a character, starts the way the operator starts it: on the
// exec's stdin, through the start subcommand, to the daemon.
func TestStartLongestCommand(t *testing.T) {
	dir := startDaemon(t)
	srv, _ := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()

	cmd, want := agenttest.EscapedCommand(agenttest.MaxCommand)
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "long", Command: cmd}); err != nil {
		t.Fatalf("start of a %d-byte command: %v", len(cmd), err)
	}
	var out bytes.Buffer
	if _, err := c.Follow(ctx, pod, "long", 0, &out); err != nil || out.String() != want {
		t.Errorf("follow: %v, output %q, want %q", err, out.String(), want)
	}
}

// TestFallsBackToSPDY: an API server that cannot upgrade to WebSocket gets
// the SPDY request kubectl would send.
func TestFallsBackToSPDY(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Upgrade"))
		mu.Unlock()
		http.Error(w, "no upgrades here", http.StatusBadRequest)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, Options{})
	_, err := c.Signal(context.Background(), pod, "uid", agentapi.SIGINT)
	if err == nil || !strings.Contains(err.Error(), pod.String()) {
		t.Errorf("error %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "GET websocket" || !strings.HasPrefix(seen[1], "POST SPDY/") {
		t.Errorf("requests %q, want a WebSocket GET then a SPDY POST", seen)
	}
}

// seen closes found once what was written holds want.
type seen struct {
	b     bytes.Buffer
	want  string
	found chan struct{}
	once  sync.Once
}

func (s *seen) Write(p []byte) (int, error) {
	s.b.Write(p)
	if strings.Contains(s.b.String(), s.want) {
		s.once.Do(func() { close(s.found) })
	}
	return len(p), nil
}

// TestFollowReturnsAtTheEndFrame: a follow returns once the agent's e frame
// is in, with the whole output, while the exec is still open, as when the
// runtime is slow to report the agent's exit; ending the caller's context
// then leaves that exec to end by itself.
func TestFollowReturnsAtTheEndFrame(t *testing.T) {
	dir := startDaemon(t)
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	f.holdEnd = map[string]bool{agentapi.CmdFollow: true}
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "j", Command: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	followCtx, endFollow := context.WithCancel(ctx)
	var out bytes.Buffer
	n, err := c.Follow(followCtx, pod, "j", 0, &out)
	if err != nil || n != 3 || out.String() != "hi\n" {
		t.Fatalf("follow: %d, %q, %v", n, out.String(), err)
	}
	endFollow()
	// A cut would show within this grace, on this machine's loopback.
	time.Sleep(200 * time.Millisecond)
	if open := f.open(agentapi.CmdFollow); open != 1 {
		t.Errorf("%d follow execs open after the caller went, want the one left to end by itself", open)
	}
}

// followResult is what a Follow returned.
type followResult struct {
	n   int64
	err error
}

// goFollow runs follow and delivers what it returned.
func goFollow(follow func() (int64, error)) <-chan followResult {
	done := make(chan followResult, 1)
	go func() {
		n, err := follow()
		done <- followResult{n, err}
	}()
	return done
}
