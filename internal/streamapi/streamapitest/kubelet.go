package streamapitest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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

// Exec is one exec the Kubelet served, once its command ended.
type Exec struct {
	Pod       types.NamespacedName
	Container string
	Command   []string
	TTY       bool
	// ExitCode is what the command exited with, as a shell reports it
	// (128+N after signal N), and Stderr what it wrote there (nothing of
	// a TTY exec's, whose stderr is its terminal).
	ExitCode int
	Stderr   string
}

// Kubelet stands for the kubelet of a Node of its own for the API
// server's pods/exec: the worker pods bound to it (Bind) are exec'd
// through the real API server, which reaches it over HTTPS as it would a
// kubelet, and it runs the agent's subcommand as the test binary against
// the pod's daemon. A TTY exec runs on a terminal of its own, which it
// keeps, with its input, for as long as its command runs, as containerd
// does: when the exec's stream goes, its command is told nothing, and
// what it writes is read no more. What still runs at the end of the test
// is killed.
type Kubelet struct {
	t       testing.TB
	env     *testenv.Env
	cluster *clustertest.Cluster
	// Node is the Node's name.
	Node string

	mu      sync.Mutex
	execs   []Exec
	running map[*exec.Cmd]bool
}

// StartKubelet runs a Kubelet and its Node until the end of the test.
func StartKubelet(t testing.TB, env *testenv.Env, c *clustertest.Cluster) *Kubelet {
	t.Helper()
	k := &Kubelet{t: t, env: env, cluster: c, Node: "kubelet-" + c.Namespace, running: map[*exec.Cmd]bool{}}
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
	t.Cleanup(k.killAll)

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

// Bind binds the worker pod to the Kubelet's Node, unless it is bound
// there already.
func (k *Kubelet) Bind(pod types.NamespacedName) {
	k.t.Helper()
	obj := &corev1.Pod{}
	if err := k.env.Client.Get(context.Background(), pod, obj); err != nil {
		k.t.Fatalf("get %s: %v", pod, err)
	}
	if obj.Spec.NodeName == k.Node {
		return
	}
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
	var stderr strings.Builder
	var err error
	if tty {
		err = e.k.runOnTerminal(c, in, out, resize)
	} else {
		c.Stdin, c.Stdout = in, out
		if errOut != nil {
			c.Stderr = io.MultiWriter(errOut, &stderr)
		} else {
			c.Stderr = &stderr
		}
		err = e.k.run(c, c.Start)
	}
	x.Stderr = stderr.String()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		x.ExitCode = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			x.ExitCode = 128 + int(ws.Signal())
		}
		return utilexec.CodeExitError{Err: err, Code: x.ExitCode}
	}
	return err
}

// runOnTerminal runs c on a terminal of its own, as containerd runs a TTY
// exec: the terminal's output goes to out while out takes it, in goes to
// the terminal, and each size from resize sizes it. Neither the end of in
// nor a failed write to out closes anything.
func (k *Kubelet) runOnTerminal(c *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	var master *os.File
	outputDone, exited := make(chan struct{}), make(chan struct{})
	defer close(exited)
	err := k.run(c, func() error {
		m, err := agenttest.StartOnTerminal(c, 0, 0)
		if err != nil {
			return err
		}
		master = m
		go func() {
			defer close(outputDone)
			_, _ = io.Copy(out, master)
		}()
		if in != nil {
			go func() { _, _ = io.Copy(master, in) }()
		}
		go func() {
			for {
				select {
				case size, ok := <-resize:
					if !ok {
						return
					}
					_ = pty.SetSize(master, size.Height, size.Width)
				case <-exited:
					return
				}
			}
		}()
		return nil
	})
	if master != nil {
		// The output ends once the command's end closed the terminal, or
		// ended before, when out took it no more.
		<-outputDone
		master.Close()
	}
	return err
}

// run starts c with start and waits for it, unless the test has ended;
// the end of the test kills it.
func (k *Kubelet) run(c *exec.Cmd, start func() error) error {
	k.mu.Lock()
	err := errors.New("the test has ended")
	if k.running != nil {
		if err = start(); err == nil {
			k.running[c] = true
		}
	}
	k.mu.Unlock()
	if err != nil {
		return err
	}
	err = c.Wait()
	k.mu.Lock()
	delete(k.running, c)
	k.mu.Unlock()
	return err
}

// killAll kills the commands that still run, and lets no more start.
func (k *Kubelet) killAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for c := range k.running {
		_ = c.Process.Kill()
	}
	k.running = nil
}
