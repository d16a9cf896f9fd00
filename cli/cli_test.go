package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/remotecommand"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// openPTY opens a pseudo-terminal and returns its terminal side.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// pipeWith returns the read end of a pipe that a goroutine fills with data.
func pipeWith(t *testing.T, data string) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go func() {
		_, _ = io.WriteString(w, data)
		w.Close()
	}()
	return r
}

func TestTerminalDetection(t *testing.T) {
	tty := openPTY(t)
	if !isTerminal(tty) || isTerminal(pipeWith(t, "")) || isTerminal(&bytes.Buffer{}) || isTerminal(strings.NewReader("")) {
		t.Fatal("isTerminal is wrong for a pty, a pipe, a buffer or a reader")
	}
	streams := func(in io.Reader) *Options {
		return &Options{IOStreams: genericiooptions.IOStreams{In: in, Out: io.Discard, ErrOut: io.Discard}}
	}
	t.Run("exec", func(t *testing.T) {
		cmd := NewExecCmd(streams(tty))
		e := &ExecOptions{Options: streams(tty), Mode: "fork"}
		if err := e.Complete(cmd, nil); err == nil || !strings.Contains(err.Error(), "no command") {
			t.Errorf("a terminal with no command: %v", err)
		}
		e = &ExecOptions{Options: streams(pipeWith(t, "echo piped\n")), Mode: "fork"}
		if err := e.Complete(cmd, nil); err != nil || e.command != "echo piped\n" {
			t.Errorf("a pipe: %q, %v", e.command, err)
		}
	})
	t.Run("repl", func(t *testing.T) {
		r := &ReplOptions{Options: streams(tty)}
		r.Complete()
		p := &ReplOptions{Options: streams(pipeWith(t, "pwd\n"))}
		p.Complete()
		if !r.interactive || p.interactive {
			t.Errorf("interactive: terminal %v, pipe %v", r.interactive, p.interactive)
		}
	})
	t.Run("console", func(t *testing.T) {
		c := &ConsoleOptions{Options: streams(tty)}
		c.Complete()
		p := &ConsoleOptions{Options: streams(pipeWith(t, "pwd\n"))}
		p.Complete()
		if c.piped || !p.piped {
			t.Errorf("piped: terminal %v, pipe %v", c.piped, p.piped)
		}
	})
}

func TestKittyOnlyOnATerminal(t *testing.T) {
	png := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 3000)
	var buf bytes.Buffer
	if wrote, err := writeKitty(&buf, bytes.NewReader(png)); wrote || err != nil || buf.Len() != 0 {
		t.Errorf("buffer: wrote %v, %v, %d bytes", wrote, err, buf.Len())
	}
	r, w, _ := os.Pipe()
	if wrote, err := writeKitty(w, bytes.NewReader(png)); wrote || err != nil {
		t.Errorf("pipe: wrote %v, %v", wrote, err)
	}
	w.Close()
	if b, _ := io.ReadAll(r); len(b) != 0 {
		t.Errorf("pipe got %d bytes", len(b))
	}
	tty := openPTY(t)
	go func() { _, _ = writeKitty(tty, bytes.NewReader(png)) }()
	_ = tty // the terminal side is written; the escape starts the stream
	if !isTerminal(tty) {
		t.Error("pty is no terminal")
	}

	// Through exec: an image left in $SHELLJOB_OUT is saved, and a piped
	// stdout gets the output and no escape sequence.
	dir := t.TempDir()
	cluster := fakeCluster(t, &fakeStream{Output: "done\n", Files: map[string][]byte{"plot.png": png}})
	out, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--output-dir", dir, "--", "plot")
	if code != 0 || out != "done\n" || strings.Contains(out, "\x1b") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	saved, err := os.ReadFile(dir + "/plot.png")
	if err != nil || !bytes.Equal(saved, png) || !strings.Contains(errOut, dir+"/plot.png") {
		t.Errorf("saved file: %v; stderr %q", err, errOut)
	}
}

// The kitty escapes of an image read as a stream: chunks of 4096 base64
// bytes, each but the last saying more follows, that decode to the image.
func TestKittyEscapes(t *testing.T) {
	for _, size := range []int{0, 1, 3072, 3073, 3 * 3072, 10_000} {
		png := make([]byte, size)
		for i := range png {
			png[i] = byte(i * 7)
		}
		var buf bytes.Buffer
		if err := kittyEscapes(&buf, iotest.OneByteReader(bytes.NewReader(png))); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.HasSuffix(out, "\n") {
			t.Errorf("%d bytes: no newline at the end", size)
		}
		var data []byte
		seqs := strings.Split(strings.TrimSuffix(out, "\n"), "\x1b\\")
		seqs = seqs[:len(seqs)-1]
		for i, seq := range seqs {
			head, b64, ok := strings.Cut(seq, ";")
			wantHead := "\x1b_Gm="
			if i == 0 {
				wantHead = "\x1b_Gf=100,a=T,m="
			}
			more := "1"
			if i == len(seqs)-1 {
				more = "0"
			}
			if !ok || head != wantHead+more || len(b64) > kittyChunk {
				t.Errorf("%d bytes: sequence %d of %d: head %q, %d base64 bytes", size, i, len(seqs), head, len(b64))
			}
			chunk, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, chunk...)
		}
		if !bytes.Equal(data, png) {
			t.Errorf("%d bytes: decoded %d bytes that differ", size, len(data))
		}
		if want := max(1, (size+3071)/3072); len(seqs) != want {
			t.Errorf("%d bytes: %d sequences, want %d", size, len(seqs), want)
		}
	}
}

// TestFilesFetchedOnlyIfAny: exec asks the agent for the job's files only
// when its status counts some, or counts none because its agent did not
// say.
func TestFilesFetchedOnlyIfAny(t *testing.T) {
	for name, tc := range map[string]struct {
		agent *fakeStream
		calls int32
	}{
		"none":         {agent: &fakeStream{Output: "hi\n"}, calls: 0},
		"some":         {agent: &fakeStream{Output: "hi\n", Files: map[string][]byte{"a.txt": []byte("a")}}, calls: 1},
		"older agent":  {agent: &fakeStream{Output: "hi\n", Uncounted: true}, calls: 1},
		"older agent+": {agent: &fakeStream{Output: "hi\n", Files: map[string][]byte{"a.txt": []byte("a")}, Uncounted: true}, calls: 1},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cluster := fakeCluster(t, tc.agent)
			out, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--output-dir", dir, "--", "echo", "hi")
			if code != 0 || out != "hi\n" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			if n := tc.agent.getFiles.Load(); n != tc.calls {
				t.Errorf("%d GetFiles calls, want %d", n, tc.calls)
			}
			for name := range tc.agent.Files {
				if !strings.Contains(errOut, "saved "+dir+"/"+name) {
					t.Errorf("stderr %q does not say %s was saved", errOut, name)
				}
			}
		})
	}
}

// TestExitWithTheOutput: an exit that comes with the output's end ends
// exec when the command ended by itself, with its code, its files and
// the delivered mark, whether or not the status says it yet; an exit
// after a stop, or none, leaves it to the status.
func TestExitWithTheOutput(t *testing.T) {
	exit := func(code int, files int64, signals ...agentapi.SentSignal) *agentapi.Event {
		return &agentapi.Event{Type: agentapi.EventExited, ExitCode: &code, Files: &agentapi.Files{Count: files}, Signals: signals}
	}
	for name, tc := range map[string]struct {
		stream   *fakeStream
		code     int32
		getFiles int32
		// unmarked: exec leaves the mark to the stream API.
		unmarked bool
	}{
		"no status yet":         {stream: &fakeStream{Output: "hi\n", Exit: exit(7, 0), Unended: true}, code: 7},
		"files, no status yet":  {stream: &fakeStream{Output: "hi\n", Exit: exit(7, 1), Files: map[string][]byte{"a.txt": []byte("a")}, Unended: true}, code: 7, getFiles: 1},
		"the stream API marks":  {stream: &fakeStream{Output: "hi\n", Exit: exit(7, 0), Unended: true, Marks: true}, code: 7, unmarked: true},
		"files: exec marks":     {stream: &fakeStream{Output: "hi\n", Exit: exit(7, 1), Files: map[string][]byte{"a.txt": []byte("a")}, Unended: true, Marks: true}, code: 7, getFiles: 1},
		"signalled: the status": {stream: &fakeStream{Output: "hi\n", Exit: exit(7, 0, agentapi.SentSignal{Signal: agentapi.SIGINT}), Marks: true}, code: 0},
		"no exit: the status":   {stream: &fakeStream{Output: "hi\n", Marks: true}, code: 0},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cluster := fakeCluster(t, tc.stream)
			out, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--output-dir", dir, "--", "echo", "hi")
			if code != int(tc.code) || out != "hi\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d", code, out, errOut, tc.code)
			}
			if n := tc.stream.getFiles.Load(); n != tc.getFiles {
				t.Errorf("%d GetFiles calls, want %d", n, tc.getFiles)
			}
			for _, j := range jobs(t, cluster) {
				if _, ok := shelljob.Delivered(&j); ok == tc.unmarked {
					t.Errorf("job %s marked delivered by exec: %v, want %v", j.Name, ok, !tc.unmarked)
				}
			}
		})
	}
}

// recordAttach is an attach that keeps what its stdin gave, until the
// stream ends (ctx) or, with end, until end closes. Its shell prints a
// prompt after promptAfter.
type recordAttach struct {
	mu          sync.Mutex
	got         bytes.Buffer
	end         chan struct{}
	ctxEnded    bool
	promptAfter time.Duration
	prompted    bool
	early       bool // input came before the prompt
}

func (r *recordAttach) attach(ctx context.Context, opts remotecommand.StreamOptions) error {
	prompted := make(chan struct{})
	defer func() { <-prompted }()
	go func() {
		defer close(prompted)
		time.Sleep(r.promptAfter)
		r.mu.Lock()
		r.prompted = true
		r.mu.Unlock()
		if opts.Stdout != nil {
			_, _ = opts.Stdout.Write([]byte("$ "))
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, err := opts.Stdin.Read(buf)
			r.mu.Lock()
			r.got.Write(buf[:n])
			if n > 0 && !r.prompted {
				r.early = true
			}
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-r.end:
		return nil
	case <-ctx.Done():
		<-done
		r.mu.Lock()
		r.ctxEnded = true
		r.mu.Unlock()
		return nil
	}
}

// A piped console forwards its input once the shell is up (has printed
// its prompt), sends exit at EOF, and closes the stream after the grace.
func TestPipedConsoleSendsExitAndCloses(t *testing.T) {
	const slowStart = 700 * time.Millisecond
	rec := &recordAttach{promptAfter: slowStart}
	var out bytes.Buffer
	c := &ConsoleOptions{Options: &Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader("echo HELLO\n")}}, piped: true}
	start := time.Now()
	err := c.stream(context.Background(), rec.attach, remotecommand.StreamOptions{Stdout: &out, Tty: true})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.got.String(); got != "echo HELLO\nexit\n" || rec.early {
		t.Errorf("stdin %q (before the prompt: %v), want the input and exit after the prompt", got, rec.early)
	}
	if want := slowStart + PipedEOFGrace; !rec.ctxEnded || took < want || took > want+time.Second {
		t.Errorf("closed by the console %v, after %v; want after %v", rec.ctxEnded, took, want)
	}
	if out.String() != "$ " {
		t.Errorf("stdout %q, want the prompt", out.String())
	}
}

func TestTerminalConsoleSendsNothingOnEOF(t *testing.T) {
	rec := &recordAttach{end: make(chan struct{})}
	c := &ConsoleOptions{Options: &Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader("ls\n")}}, piped: false}
	go func() {
		// The remote shell ends the session, well after the grace.
		time.Sleep(PipedEOFGrace + 500*time.Millisecond)
		close(rec.end)
	}()
	if err := c.stream(context.Background(), rec.attach, remotecommand.StreamOptions{Tty: true}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.got.String(); got != "ls\n" || rec.ctxEnded {
		t.Errorf("stdin %q, closed by the console %v: want only the input, and the remote to end it", got, rec.ctxEnded)
	}
}

func TestPipedReplRunsOneJob(t *testing.T) {
	cluster := fakeCluster(t, &fakeStream{Output: "/tmp\n"})
	script := "cd /tmp\nx=1\npwd\n"
	out, errOut, code := testCmd(t, cluster, strings.NewReader(script), "repl", "--pool", "p")
	if code != 0 || out != "/tmp\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	js := jobs(t, cluster)
	if len(js) != 1 {
		t.Fatalf("%d jobs, want 1", len(js))
	}
	spec := js[0].Spec
	if spec.Command != script || spec.Mode != shellv1alpha1.ModeStateful || spec.Pool != "p" ||
		spec.Origin.Source != shellv1alpha1.OriginCLI || spec.Origin.User != "" {
		// The user is the API server's to fill in (the origin-user policy).
		t.Errorf("spec %+v", spec)
	}
}

// TestUserNamedWithoutTheOriginUserPolicy: a cluster that refuses a job
// from the CLI with no user, having no policy to fill it in, gets one
// named after a SelfSubjectReview, asked once for all the jobs.
func TestUserNamedWithoutTheOriginUserPolicy(t *testing.T) {
	cluster := fakeCluster(t, &fakeStream{Output: "ok\n"})
	cluster.Jobs.(*fakeJobs).requireUser = true
	asked := 0
	cluster.WhoAmI = func(context.Context) (string, error) { asked++; return "alice", nil }
	r := &runner{cluster: cluster}
	for range 2 {
		sj, err := r.create(context.Background(), jobRequest{Command: "echo ok", Mode: shellv1alpha1.ModeFork, Pool: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if sj.Spec.Origin.User != "alice" {
			t.Errorf("origin %+v", sj.Spec.Origin)
		}
	}
	if asked != 1 {
		t.Errorf("asked who it is %d times, want 1", asked)
	}
}

func TestPipedCommandLimit(t *testing.T) {
	whole := strings.Repeat("#", maxCommand-len("echo ok\n")) + "echo ok\n"
	cluster := fakeCluster(t, &fakeStream{Output: "ok\n"})
	// Through a real pipe, whose writer must not block.
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, errOut, code := testCmd(t, cluster, pipeWith(t, whole), "exec", "--timeout", "0")
		if code != 0 || out != "ok\n" {
			t.Errorf("64 KiB: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("64 KiB of stdin blocked")
	}
	js := jobs(t, cluster)
	if len(js) != 1 || js[0].Spec.Command != whole || js[0].Spec.IdleTimeoutSeconds != nil {
		t.Fatalf("%d jobs; want one with the whole command and no timeout", len(js))
	}

	_, errOut, code := testCmd(t, cluster, pipeWith(t, whole+"x"), "exec")
	if code != 1 || !strings.Contains(errOut, "error: the command is over 64 KiB") {
		t.Errorf("64 KiB + 1: exit %d, stderr %q", code, errOut)
	}
	if n := len(jobs(t, cluster)); n != 1 {
		t.Errorf("%d jobs after a command too long; want none created", n-1)
	}
}

func TestExecDefaults(t *testing.T) {
	cluster := fakeCluster(t, &fakeStream{Output: "hi\n"})
	if _, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--mode", "Direct", "--", "echo", "hi"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	spec := jobs(t, cluster)[0].Spec
	if spec.Command != "echo hi" || spec.Mode != shellv1alpha1.ModeDirect || spec.Pool != shellv1alpha1.DefaultPool ||
		spec.IdleTimeoutSeconds == nil || *spec.IdleTimeoutSeconds != 30 {
		t.Errorf("spec %+v", spec)
	}
	if _, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--mode", "bash", "--", "true"); code != 1 || !strings.Contains(errOut, `invalid --mode "bash"`) {
		t.Errorf("bad mode: exit %d, %q", code, errOut)
	}
}

func TestExitCodes(t *testing.T) {
	code := func(j *shellv1alpha1.ShellJob) (int, string) {
		var errOut bytes.Buffer
		r := &runner{IOStreams: genericiooptions.IOStreams{ErrOut: &errOut}}
		n, err := r.exitCode(j)
		if err != nil {
			errOut.WriteString(err.Error())
		}
		return n, errOut.String()
	}
	three, timeout := int32(3), int64(30)
	j := &shellv1alpha1.ShellJob{}
	j.Status.ExitCode = &three
	if n, _ := code(j); n != 3 {
		t.Errorf("exit 3: %d", n)
	}
	j.Status.StopReason, j.Spec.IdleTimeoutSeconds = shellv1alpha1.StopReasonTimeout, &timeout
	if n, msg := code(j); n != ExitTimeout || !strings.Contains(msg, "no output for 30s") {
		t.Errorf("timeout: %d, %q", n, msg)
	}
	if !errors.Is(exitCode(3), exitCode(3)) {
		t.Error("exitCode is not comparable")
	}
}
