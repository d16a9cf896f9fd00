package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/cli"
	"shelljob.dev/shelljob/internal/agentapi"
)

// asAgent makes the test binary run as shelljob-agent.
const asAgent = "SHELLJOB_AGENT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asAgent) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const waitLong = 60 * time.Second

// agentProcess runs the test binary as the agent with args, on spoolDir.
func agentProcess(spoolDir string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asAgent+"=1", agentapi.SpoolDirEnv+"="+spoolDir)
	return cmd
}

// startDaemon runs a daemon for one fake pod and returns its spool dir.
func startDaemon(t *testing.T, extra ...string) string {
	t.Helper()
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Fatal("these tests run real commands in zsh: apt-get install -y zsh")
	}
	dir := t.TempDir()
	var logs bytes.Buffer
	cmd := agentProcess(dir, append([]string{"serve", "-v", "1"}, extra...)...)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(ended)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-ended
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	c := agent.NewClient(agent.SocketPath(dir))
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("agent not answering")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return dir
}

// fakeExec is the exec endpoint of an API server, over WebSocket (v5) only:
// it runs the agent subcommand of the request in the spool dir of the pod.
type fakeExec struct {
	t    *testing.T
	pods map[string]string // namespace/name -> spool dir

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

	cmd := agentProcess(dir, command[1:]...)
	cmd.Stdout, cmd.Stderr = streams[1], streams[2]
	if stdin {
		// As the kubelet does, the exec ends with the process, whether or
		// not its stdin is still open.
		in, err := cmd.StdinPipe()
		if err != nil {
			f.t.Error(err)
			return
		}
		go func() {
			_, _ = io.Copy(in, streams[0])
			in.Close()
		}()
	}
	status := metav1.Status{Status: metav1.StatusSuccess}
	if err := cmd.Run(); err != nil {
		code := 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
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
	_, _ = streams[3].Write(b)
}

func newFakeAPIServer(t *testing.T, pods map[string]string) (*httptest.Server, *fakeExec) {
	f := &fakeExec{t: t, pods: pods}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}
