package streamapitest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/cert"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/agent/pty"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/testenv"
)

// execProtocols are the kubelet's SPDY ones: the API server speaks SPDY
// to it, and translates a caller's WebSocket (v5.channel.k8s.io).
var execProtocols = []string{
	remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV3Name,
	remotecommand.StreamProtocolV2Name, remotecommand.StreamProtocolV1Name,
}

// Exec is one exec the Kubelet served.
type Exec struct {
	Pod       types.NamespacedName
	Container string
	Command   []string
	TTY       bool
	// ExitCode is what the command exited with, and Stderr what it wrote
	// there.
	ExitCode int
	Stderr   string
}

// Kubelet stands for the kubelet of a Node of its own for the API
// server's pods/exec: the worker pods bound to it (Bind) are exec'd
// through the real API server, which reaches it over HTTPS as it would a
// kubelet, and it runs the agent's subcommand as the test binary against
// the pod's daemon, on a pseudo-terminal of its own for a TTY exec.
type Kubelet struct {
	t       testing.TB
	env     *testenv.Env
	cluster *clustertest.Cluster
	// Node is the Node's name.
	Node string

	mu    sync.Mutex
	execs []Exec
}

// StartKubelet runs a Kubelet and its Node until the end of the test.
func StartKubelet(t testing.TB, env *testenv.Env, c *clustertest.Cluster) *Kubelet {
	t.Helper()
	k := &Kubelet{t: t, env: env, cluster: c, Node: "kubelet-" + c.Namespace}
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", k.serveExec)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.Node}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatalf("create node %s: %v", k.Node, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(ln.Addr().(*net.TCPAddr).Port)
	if err := env.Client.Status().Update(ctx, node); err != nil {
		t.Fatalf("write node %s's address: %v", k.Node, err)
	}
	return k
}

// Bind binds the worker pod to the Kubelet's Node.
func (k *Kubelet) Bind(pod types.NamespacedName) {
	k.t.Helper()
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target: corev1.ObjectReference{Kind: "Node", Name: k.Node}}
	if err := k.env.Client.SubResource("binding").Create(context.Background(), obj, binding); err != nil {
		k.t.Fatalf("bind %s to node %s: %v", pod, k.Node, err)
	}
}

// Execs are the execs served so far.
func (k *Kubelet) Execs() []Exec {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Exec(nil), k.execs...)
}

func (k *Kubelet) serveExec(w http.ResponseWriter, req *http.Request) {
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod := types.NamespacedName{Namespace: req.PathValue("namespace"), Name: req.PathValue("pod")}
	remotecommand.ServeExec(w, req, executor{k: k, pod: pod}, pod.Name, "", req.PathValue("container"),
		req.URL.Query()["command"], opts, time.Minute, remotecommand.DefaultStreamCreationTimeout, execProtocols)
}

// executor runs an exec's command in its pod.
type executor struct {
	k   *Kubelet
	pod types.NamespacedName
}

func (e executor) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	x := Exec{Pod: e.pod, Container: container, Command: cmd, TTY: tty}
	defer func() {
		e.k.mu.Lock()
		e.k.execs = append(e.k.execs, x)
		e.k.mu.Unlock()
	}()
	if len(cmd) == 0 || cmd[0] != agentapi.AgentPath {
		return fmt.Errorf("the stand-in kubelet runs the agent alone, not %q", cmd)
	}
	c := agenttest.Command(cmd[1:]...)
	c.Env = append(c.Env, agentapi.SpoolDirEnv+"="+filepath.Dir(e.k.cluster.Agents.Socket(e.pod)))
	var err error
	if tty {
		err = onTerminal(ctx, c, in, out, resize)
	} else {
		var stderr strings.Builder
		c.Stdin, c.Stdout = in, out
		if errOut != nil {
			c.Stderr = io.MultiWriter(errOut, &stderr)
		} else {
			c.Stderr = &stderr
		}
		err = c.Run()
		x.Stderr = stderr.String()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		x.ExitCode = exit.ExitCode()
		return utilexec.CodeExitError{Err: err, Code: exit.ExitCode()}
	}
	return err
}

// onTerminal runs c on a pseudo-terminal of its own, as a kubelet runs a
// TTY exec: its session's controlling terminal, and its standard streams.
// in goes to the terminal, what c writes there to out, and each size of
// resize to the terminal's window. The end of the exec (ctx) hangs the
// terminal up.
func onTerminal(ctx context.Context, c *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	master, slave, err := pty.Open()
	if err != nil {
		return err
	}
	defer master.Close()
	c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err = c.Start()
	slave.Close()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s, ok := <-resize:
				if !ok {
					return
				}
				_ = pty.SetSize(master, s.Height, s.Width)
			case <-ctx.Done():
				// A closed master hangs the terminal's session up.
				master.Close()
				return
			case <-done:
				return
			}
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(master, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		// The master reads what the terminal holds, then fails once no
		// process has the terminal open.
		_, _ = io.Copy(out, master)
	}()
	err = c.Wait()
	<-copied
	return err
}
