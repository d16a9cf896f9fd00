package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// fakeConsole plays a console's shell: it prints a prompt, reads its
// input until "exit", and ends with code, or fails with err at once.
type fakeConsole struct {
	code int
	err  error

	mu    sync.Mutex
	jobs  []string
	input bytes.Buffer
	tty   bool
}

func (a *fakeConsole) Attach(ctx context.Context, job string, opts remotecommand.StreamOptions) error {
	a.mu.Lock()
	a.jobs = append(a.jobs, job)
	a.tty = opts.Tty
	a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	if _, err := opts.Stdout.Write([]byte("$ ")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	for {
		n, err := opts.Stdin.Read(buf)
		a.mu.Lock()
		a.input.Write(buf[:n])
		exited := strings.Contains(a.input.String(), pipedExit)
		a.mu.Unlock()
		if exited {
			return utilexec.CodeExitError{Err: errors.New("command terminated with non-zero exit code"), Code: a.code}
		}
		if err != nil {
			return nil
		}
	}
}

// withPool adds pool name, whose shell is shell, to cluster.
func withPool(t *testing.T, cluster *Cluster, name, shell string) *Cluster {
	t.Helper()
	pool := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}, Spec: shellv1alpha1.ShellPoolSpec{Shell: shell}}
	if err := cluster.Pools.(fakePools).c.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return cluster
}

// The console creates a Console job that runs the pool's shell as a login
// shell with the local TERM, attaches to it once it is placed, ends with
// its shell's exit status, and marks it delivered.
func TestConsoleIsAJob(t *testing.T) {
	t.Setenv("TERM", "screen-256color")
	attacher := &fakeConsole{code: 3}
	cluster := withPool(t, fakeCluster(t, &fakeStream{Console: attacher}), "p", "bash")
	out, errOut, code := testCmd(t, cluster, strings.NewReader("echo hi\n"), "console", "--pool", "p")
	if code != 3 || out != "$ " {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3 and the prompt", code, out, errOut)
	}
	js := jobs(t, cluster)
	if len(js) != 1 {
		t.Fatalf("%d jobs, want 1", len(js))
	}
	j := js[0]
	if j.Spec.Mode != shellv1alpha1.ModeConsole || j.Spec.Command != "TERM=screen-256color exec bash -l" || j.Spec.Pool != "p" ||
		j.Spec.Origin.Source != shellv1alpha1.OriginCLI || j.Spec.IdleTimeoutSeconds != nil {
		t.Errorf("spec %+v", j.Spec)
	}
	attacher.mu.Lock()
	defer attacher.mu.Unlock()
	if len(attacher.jobs) != 1 || attacher.jobs[0] != j.Name || !attacher.tty || attacher.input.String() != "echo hi\n"+pipedExit {
		t.Errorf("attached %q, tty %v, input %q", attacher.jobs, attacher.tty, attacher.input.String())
	}
	if _, ok := shelljob.Delivered(&j); !ok {
		t.Errorf("the console's job is not marked delivered: %v", j.Annotations)
	}
}

// A console whose attach fails says so, and stops its job rather than
// leave it to the agent's wait for an attach.
func TestConsoleAttachFailureStopsTheJob(t *testing.T) {
	cluster := withPool(t, fakeCluster(t, &fakeStream{Console: &fakeConsole{err: errors.New("the server could not find the requested resource")}}), "p", "")
	_, errOut, code := testCmd(t, cluster, strings.NewReader(""), "console", "--pool", "p")
	if code != 1 || !strings.Contains(errOut, "error: attach to the console of #1: the server could not find the requested resource") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	js := jobs(t, cluster)
	if len(js) != 1 || !js[0].Spec.Stop || js[0].Spec.StopReason != shellv1alpha1.StopReasonUser {
		t.Fatalf("jobs %+v, want one, stopped", js)
	}
	if !strings.HasSuffix(js[0].Spec.Command, " exec zsh -l") {
		t.Errorf("command %q: the pool names no shell, so zsh", js[0].Spec.Command)
	}
}

func TestConsoleCommand(t *testing.T) {
	for _, tc := range []struct{ shell, term, want string }{
		{"zsh", "xterm-256color", "TERM=xterm-256color exec zsh -l"},
		{"/usr/bin/bash", "tmux-256color", "TERM=tmux-256color exec /usr/bin/bash -l"},
		{"/opt/my shell/zsh", "it's", `TERM='it'\''s' exec '/opt/my shell/zsh' -l`},
	} {
		if got := consoleCommand(tc.shell, tc.term); got != tc.want {
			t.Errorf("consoleCommand(%q, %q) = %q, want %q", tc.shell, tc.term, got, tc.want)
		}
	}
}
