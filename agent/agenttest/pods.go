package agenttest

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/internal/agentapi"
)

// Pods stands for the agents of worker pods: one real daemon per pod, on
// this machine, reached through agent.Pods. It is an agentapi.Client, as
// the exec'd agents of a cluster are.
type Pods struct {
	agent.Pods
	t testing.TB
	// root holds the daemons' spools and homes. It is made before any
	// cleanup that may stop a daemon, so it is removed after them all.
	root string

	mu      sync.Mutex
	daemons map[types.NamespacedName]*daemon
	closed  bool
}

var _ agentapi.Client = (*Pods)(nil)

type daemon struct {
	dir  string
	proc *Process
}

// NewPods returns Pods with no daemon yet, whose streams are cut idle as
// an exec client's (agentapi.DefaultStreamIdle). Every daemon ends with
// the test.
func NewPods(t testing.TB) *Pods {
	t.Helper()
	NeedZsh(t)
	p := &Pods{t: t, root: TempDir(t), daemons: map[types.NamespacedName]*daemon{}}
	p.Pods = agent.Pods{StreamIdle: agentapi.DefaultStreamIdle, Socket: func(pod types.NamespacedName) string {
		p.mu.Lock()
		defer p.mu.Unlock()
		if d, ok := p.daemons[pod]; ok {
			return agent.SocketPath(d.dir)
		}
		// Nothing answers there, as no agent does in a pod that is gone.
		return agent.SocketPath(p.root)
	}}
	t.Cleanup(p.stopAll)
	return p
}

// Serve starts the daemon of pod, with a home of its own and args after
// "serve --spool-dir DIR --home HOME", and waits until it answers. Its log
// is in the test's output if the test fails. It may run on any goroutine.
func (p *Pods) Serve(pod types.NamespacedName, args ...string) error {
	var dirs [2]string
	for i := range dirs {
		dir, err := os.MkdirTemp(p.root, "")
		if err != nil {
			return err
		}
		// The users of an isolating agent's commands reach their own
		// directories below it.
		if err := os.Chmod(dir, 0o711); err != nil {
			return err
		}
		dirs[i] = dir
	}
	spool, home := dirs[0], dirs[1]
	proc, err := serve(p.t, spool, "the agent of "+pod.String(), append([]string{"--home", home}, args...)...)
	if err != nil {
		return fmt.Errorf("agent of %s: %w", pod, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		proc.Stop()
		return fmt.Errorf("agent of %s: the test has ended", pod)
	}
	p.daemons[pod] = &daemon{dir: spool, proc: proc}
	return nil
}

// Serving reports whether pod has a daemon.
func (p *Pods) Serving(pod types.NamespacedName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.daemons[pod]
	return ok
}

// Daemons lists the pods that have a daemon.
func (p *Pods) Daemons() []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.daemons))
}

// Stop ends the daemon of pod as the pod's deletion would (Process.Stop),
// and forgets it.
func (p *Pods) Stop(pod types.NamespacedName) { p.end(pod, (*Process).Stop) }

// Pause stops the daemon of pod (Process.Pause) until resume, which the
// end of the test calls if the test does not. It may run on any
// goroutine; a pod without a daemon fails the test.
func (p *Pods) Pause(pod types.NamespacedName) (resume func()) {
	p.mu.Lock()
	d, ok := p.daemons[pod]
	p.mu.Unlock()
	if !ok {
		p.t.Errorf("pause %s: no daemon", pod)
		return func() {}
	}
	return d.proc.Pause(p.t)
}

// Kill ends the daemon of pod as a crash would (Process.Kill), and forgets
// it.
func (p *Pods) Kill(pod types.NamespacedName) { p.end(pod, (*Process).Kill) }

func (p *Pods) end(pod types.NamespacedName, how func(*Process)) {
	p.mu.Lock()
	d, ok := p.daemons[pod]
	delete(p.daemons, pod)
	p.mu.Unlock()
	if ok {
		how(d.proc)
	}
}

// stopAll stops every daemon, and any that Serve starts later.
func (p *Pods) stopAll() {
	p.mu.Lock()
	p.closed = true
	daemons := p.daemons
	p.daemons = map[types.NamespacedName]*daemon{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range daemons {
		wg.Go(d.proc.Stop)
	}
	wg.Wait()
}
