package agentclient

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/agent/pty"
	"shelljob.dev/shelljob/internal/agentapi"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

const waitLong = 60 * time.Second

// agentProcess runs the test binary as the agent with args, on spoolDir.
func agentProcess(spoolDir string, args ...string) *exec.Cmd {
	cmd := agenttest.Command(args...)
	cmd.Env = append(cmd.Env, agentapi.SpoolDirEnv+"="+spoolDir)
	return cmd
}

// startDaemon runs a daemon for one fake pod and returns its spool dir.
func startDaemon(t *testing.T, extra ...string) string {
	t.Helper()
	return agenttest.Serve(t, append([]string{"-v", "1"}, extra...)...)
}

// fakeExec is the exec endpoint of an API server, over WebSocket (v5) only:
// it runs the agent subcommand of the request in the spool dir of the pod.
type fakeExec struct {
	t    *testing.T
	pods map[string]string // namespace/name -> spool dir
	// refuse answers these subcommands, or a subcommand given a flag
	// ("follow --text"), with this exit code, as an older agent does.
	refuse map[string]int
	// flags are added to these subcommands' command lines.
	flags map[string][]string
	// holdEnd keeps these subcommands' execs open after the process ended,
	// until the client closes its stdin, as a runtime slow to report an
	// exit.
	holdEnd map[string]bool

	mu      sync.Mutex
	calls   []string             // the subcommands run, in order
	stdout  map[string]int64     // the bytes each subcommand wrote
	running map[*exec.Cmd]string // the running ones
	held    int                  // the holdEnd execs open after their process ended
}

// stdoutCounter counts what a subcommand writes to its stdout.
type stdoutCounter struct {
	f   *fakeExec
	sub string
	w   io.Writer
}

func (c *stdoutCounter) Write(p []byte) (int, error) {
	c.f.mu.Lock()
	if c.f.stdout == nil {
		c.f.stdout = map[string]int64{}
	}
	c.f.stdout[c.sub] += int64(len(p))
	c.f.mu.Unlock()
	return c.w.Write(p)
}

// wrote is how many bytes the execs of a subcommand wrote to stdout.
func (f *fakeExec) wrote(sub string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stdout[sub]
}

// ran returns the subcommands run so far.
func (f *fakeExec) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// open is how many execs of a subcommand are open: running, or held
// open after their process ended (holdEnd).
func (f *fakeExec) open(sub string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.held
	for _, s := range f.running {
		if s == sub {
			n++
		}
	}
	return n
}

// kill kills the running processes of a subcommand, as a cut exec.
func (f *fakeExec) kill(sub string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for cmd, s := range f.running {
		if s == sub {
			_ = cmd.Process.Kill()
			n++
		}
	}
	return n
}

func (f *fakeExec) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// /api/v1/namespaces/NS/pods/NAME/exec
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) != 7 || parts[6] != "exec" {
		http.NotFound(w, req)
		return
	}
	dir, ok := f.pods[parts[3]+"/"+parts[5]]
	if !ok {
		http.Error(w, `pods "`+parts[5]+`" not found`, http.StatusNotFound)
		return
	}
	q := req.URL.Query()
	command := q["command"]
	if len(command) < 2 || command[0] != agentapi.AgentPath {
		http.Error(w, "not the agent", http.StatusBadRequest)
		return
	}
	stdin := q.Get("stdin") == "true"
	read := wsstream.IgnoreChannel
	if stdin {
		read = wsstream.ReadChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: []wsstream.ChannelType{
			read, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.ReadChannel,
		}},
	})
	_, streams, err := conn.Open(w, req)
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = streams[1].Write(nil) // the connection is up

	f.mu.Lock()
	f.calls = append(f.calls, command[1])
	code, refused := f.refuse[command[1]]
	for _, arg := range command[2:] {
		name, _, _ := strings.Cut(arg, "=")
		if c, ok := f.refuse[command[1]+" "+name]; ok {
			code, refused = c, true
		}
	}
	args := slices.Concat(command[1:], f.flags[command[1]])
	hold := f.holdEnd[command[1]]
	f.mu.Unlock()
	if refused {
		_, _ = fmt.Fprintf(streams[2], "usage: shelljob-agent ...\n")
		writeStatus(streams[3], code)
		return
	}
	cmd := agentProcess(dir, args...)
	cmd.Stdout, cmd.Stderr = &stdoutCounter{f: f, sub: command[1], w: streams[1]}, streams[2]
	stdinClosed := make(chan struct{})
	var outputDone chan struct{}
	if q.Get("tty") == "true" {
		// As the kubelet does for a TTY: the process's streams are a
		// terminal of its own, stderr merged, sized by the resize stream.
		master, slave, err := pty.Open()
		if err != nil {
			f.t.Error(err)
			return
		}
		defer master.Close()
		defer slave.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		outputDone = make(chan struct{})
		go func() {
			defer close(outputDone)
			_, _ = io.Copy(streams[1], master)
		}()
		if stdin {
			go func() { _, _ = io.Copy(master, streams[0]) }()
		}
		go func() {
			dec := json.NewDecoder(streams[4])
			for {
				var size struct{ Width, Height uint16 }
				if dec.Decode(&size) != nil {
					return
				}
				_ = pty.SetSize(master, size.Height, size.Width)
			}
		}()
		stdin = false
	}
	if stdin {
		// As the kubelet does, the exec ends with the process, whether or
		// not its stdin is still open.
		in, err := cmd.StdinPipe()
		if err != nil {
			f.t.Error(err)
			return
		}
		go func() {
			defer close(stdinClosed)
			_, _ = io.Copy(in, streams[0])
			in.Close()
		}()
	}
	code = 0
	err = cmd.Start()
	if err == nil {
		f.mu.Lock()
		f.running[cmd] = command[1]
		f.mu.Unlock()
		if outputDone != nil {
			// The process holds the terminal now: its output ends when
			// the last of its holders closes it.
			cmd.Stdin.(*os.File).Close()
		}
		err = cmd.Wait()
		if outputDone != nil {
			<-outputDone
		}
		f.mu.Lock()
		delete(f.running, cmd)
		f.mu.Unlock()
	}
	if err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	if hold && stdin {
		f.mu.Lock()
		f.held++
		f.mu.Unlock()
		<-stdinClosed
		f.mu.Lock()
		f.held--
		f.mu.Unlock()
	}
	writeStatus(streams[3], code)
}

// writeStatus writes the exec's end on the error stream, as the API server
// does.
func writeStatus(w io.Writer, code int) {
	status := metav1.Status{Status: metav1.StatusSuccess}
	if code != 0 {
		status = metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: fmt.Sprint(code)},
			}},
		}
	}
	b, _ := json.Marshal(status)
	_, _ = w.Write(b)
}

func newFakeAPIServer(t *testing.T, pods map[string]string) (*httptest.Server, *fakeExec) {
	f := &fakeExec{t: t, pods: pods, running: map[*exec.Cmd]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}
