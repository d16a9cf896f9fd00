package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/internal/agentapi"
)

// fakeAgent is an in-process agentapi.Client for the envtest suites: there
// is no kubelet in envtest, so no agent either. Commands act out a script
// read from their text:
//   - "exit N" exits N at once;
//   - a command with "sleep" runs until signalled: SIGINT ends it with 130,
//     SIGTERM with 143, SIGKILL with 137, except that a command that traps
//     INT to nothing ignores SIGINT, and one that traps INT and TERM to
//     nothing ignores both (see ignoresINT and ignoresTERM);
//   - any other command exits 0 at once.
//
// Tests can also end a job with exit, break a pod's streams, and make
// Start fail.
type fakeAgent struct {
	mu       sync.Mutex
	pods     map[types.NamespacedName]*fakePod
	pgid     int
	failNext int
	// calls logs Start and Signal calls, as "start pod job" and
	// "signal pod job SIG".
	calls []string
	// holds keep the answer of the next Signal call of a signal; see
	// holdSignal.
	holds map[agentapi.Signal]*signalHold
	// onStart, if set, runs in each Start call that starts a job, before
	// it answers.
	onStart func(pod types.NamespacedName, req agentapi.StartRequest)
}

// signalHold is a Signal call whose answer waits: the signal has taken
// effect, as in an exec whose reply is slow to come back.
type signalHold struct {
	// arrived is closed once the call is held.
	arrived chan struct{}
	// release lets the call answer.
	release chan struct{}
}

type fakePod struct {
	jobs    map[string]*fakeJob
	order   []string
	streams map[int]*fakeStream
	next    int
}

type fakeStream struct {
	handle func(agentapi.Event)
	broken chan struct{}
}

type fakeJob struct {
	req       agentapi.StartRequest
	pgid      int
	startedAt time.Time
	exited    bool
	code      int
	lost      bool
	exitedAt  time.Time
}

var exitCmd = regexp.MustCompile(`^exit (\d+)$`)

// What a command holds to ignore signals, in the fake's script.
const (
	ignoresINT  = "trap '' INT"
	ignoresTERM = "trap '' INT TERM"
)

func newFakeAgent() *fakeAgent {
	return &fakeAgent{pods: map[types.NamespacedName]*fakePod{}, pgid: 100, holds: map[agentapi.Signal]*signalHold{}}
}

// holdSignal makes the next Signal call of sig wait, once the signal took
// effect, until the hold is released or the call's context ends, which
// fails the call as a cut exec would.
func (a *fakeAgent) holdSignal(sig agentapi.Signal) *signalHold {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := &signalHold{arrived: make(chan struct{}), release: make(chan struct{})}
	a.holds[sig] = h
	return h
}

func (a *fakeAgent) pod(key types.NamespacedName) *fakePod {
	p, ok := a.pods[key]
	if !ok {
		p = &fakePod{jobs: map[string]*fakeJob{}, streams: map[int]*fakeStream{}}
		a.pods[key] = p
	}
	return p
}

// emit sends ev to the pod's streams; call without a.mu.
func (a *fakeAgent) emit(key types.NamespacedName, ev agentapi.Event) {
	a.mu.Lock()
	var handlers []func(agentapi.Event)
	for _, s := range a.pod(key).streams {
		handlers = append(handlers, s.handle)
	}
	a.mu.Unlock()
	for _, h := range handlers {
		h(ev)
	}
}

// events is how the agent replays a job: its exit once it ended, else
// its start.
func (j *fakeJob) events() []agentapi.Event {
	if j.exited {
		return []agentapi.Event{j.exitEvent()}
	}
	return []agentapi.Event{{Type: agentapi.EventStarted, Job: j.req.Job, Time: j.startedAt, PGID: j.pgid}}
}

func (j *fakeJob) exitEvent() agentapi.Event {
	ev := agentapi.Event{Type: agentapi.EventExited, Job: j.req.Job, Time: j.exitedAt, PGID: j.pgid,
		Lost: j.lost, OutputBytes: int64(len(j.req.Command))}
	if !j.lost {
		code := j.code
		ev.ExitCode = &code
	}
	return ev
}

func (a *fakeAgent) Start(_ context.Context, pod types.NamespacedName, req agentapi.StartRequest) (agentapi.StartResponse, error) {
	a.mu.Lock()
	if a.failNext > 0 {
		a.failNext--
		a.mu.Unlock()
		return agentapi.StartResponse{}, errors.New("exec: connection refused")
	}
	p := a.pod(pod)
	if j, ok := p.jobs[req.Job]; ok {
		a.mu.Unlock()
		return agentapi.StartResponse{PGID: j.pgid, StartedAt: j.startedAt}, nil
	}
	a.pgid++
	j := &fakeJob{req: req, pgid: a.pgid, startedAt: time.Now()}
	p.jobs[req.Job] = j
	p.order = append(p.order, req.Job)
	a.calls = append(a.calls, fmt.Sprintf("start %s %s", pod.Name, req.Job))
	onStart := a.onStart
	a.mu.Unlock()
	if onStart != nil {
		onStart(pod, req)
	}

	a.emit(pod, agentapi.Event{Type: agentapi.EventStarted, Job: req.Job, Time: j.startedAt, PGID: j.pgid})
	if m := exitCmd.FindStringSubmatch(req.Command); m != nil {
		code, _ := strconv.Atoi(m[1])
		go a.exit(pod, req.Job, code)
	} else if !strings.Contains(req.Command, "sleep") {
		go a.exit(pod, req.Job, 0)
	}
	return agentapi.StartResponse{PGID: j.pgid, StartedAt: j.startedAt}, nil
}

// exit ends a job with code, as its command would.
func (a *fakeAgent) exit(pod types.NamespacedName, job string, code int) {
	time.Sleep(10 * time.Millisecond)
	a.mu.Lock()
	j, ok := a.pod(pod).jobs[job]
	if !ok || j.exited {
		a.mu.Unlock()
		return
	}
	j.exited, j.code, j.exitedAt = true, code, time.Now()
	ev := j.exitEvent()
	a.mu.Unlock()
	a.emit(pod, ev)
}

func (a *fakeAgent) Signal(ctx context.Context, pod types.NamespacedName, job string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	a.mu.Lock()
	j, ok := a.pod(pod).jobs[job]
	if !ok {
		a.mu.Unlock()
		return agentapi.SignalResponse{}, fmt.Errorf("signal %s in %s: %w", job, pod, agentapi.ErrUnknownJob)
	}
	a.calls = append(a.calls, fmt.Sprintf("signal %s %s %s", pod.Name, job, sig))
	if j.exited {
		a.mu.Unlock()
		return agentapi.SignalResponse{GroupEmpty: true}, nil
	}
	code := map[agentapi.Signal]int{agentapi.SIGINT: 130, agentapi.SIGTERM: 143, agentapi.SIGKILL: 137}[sig]
	ignored := sig == agentapi.SIGINT && strings.Contains(j.req.Command, ignoresINT) ||
		sig == agentapi.SIGTERM && strings.Contains(j.req.Command, ignoresTERM)
	hold := a.holds[sig]
	delete(a.holds, sig)
	a.mu.Unlock()
	if !ignored {
		go a.exit(pod, job, code)
	}
	if hold != nil {
		close(hold.arrived)
		select {
		case <-hold.release:
		case <-ctx.Done():
			return agentapi.SignalResponse{}, fmt.Errorf("signal %s in %s: %w", job, pod, ctx.Err())
		}
	}
	return agentapi.SignalResponse{}, nil
}

func (a *fakeAgent) Events(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	a.mu.Lock()
	p := a.pod(pod)
	var replay []agentapi.Event
	for _, id := range p.order {
		replay = append(replay, p.jobs[id].events()...)
	}
	// Register before the replay is handed over, so no event falls between.
	s := &fakeStream{handle: handle, broken: make(chan struct{})}
	id := p.next
	p.next++
	var mu sync.Mutex
	mu.Lock()
	s.handle = func(ev agentapi.Event) { mu.Lock(); defer mu.Unlock(); handle(ev) }
	p.streams[id] = s
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(p.streams, id)
		a.mu.Unlock()
	}()
	for _, ev := range replay {
		handle(ev)
	}
	handle(agentapi.Event{Type: agentapi.EventSynced, Time: time.Now()})
	mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.broken:
		return io.ErrUnexpectedEOF
	}
}

// restart acts out an agent restart: its running jobs end lost, and the
// jobs in forget leave its spool altogether. Streams break.
func (a *fakeAgent) restart(pod types.NamespacedName, forget ...string) {
	a.mu.Lock()
	p := a.pod(pod)
	for _, j := range p.jobs {
		if !j.exited {
			j.exited, j.lost, j.exitedAt = true, true, time.Now()
		}
	}
	for _, id := range forget {
		delete(p.jobs, id)
		p.order = slices.DeleteFunc(p.order, func(o string) bool { return o == id })
	}
	a.mu.Unlock()
	a.breakStreams(pod)
}

// breakStreams cuts the pod's open streams, as a lost connection would.
func (a *fakeAgent) breakStreams(pod types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, s := range a.pod(pod).streams {
		close(s.broken)
		delete(a.pod(pod).streams, id)
	}
}

// streamCount is how many streams are open on the pod.
func (a *fakeAgent) streamCount(pod types.NamespacedName) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pod(pod).streams)
}

// callLog returns the calls made so far.
// podNamespaces lists the namespaces of the pods the agent was reached in.
func (a *fakeAgent) podNamespaces() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for key := range a.pods {
		if !slices.Contains(out, key.Namespace) {
			out = append(out, key.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

func (a *fakeAgent) callLog() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// failStarts makes the next n Start calls fail.
func (a *fakeAgent) failStarts(n int) {
	a.mu.Lock()
	a.failNext = n
	a.mu.Unlock()
}

func (a *fakeAgent) Follow(context.Context, types.NamespacedName, string, int64, io.Writer) (int64, error) {
	return 0, errors.New("fake agent: Follow is not used by the operator")
}

func (a *fakeAgent) FollowText(context.Context, types.NamespacedName, string, agentapi.TextMode, io.Writer) error {
	return errors.New("fake agent: FollowText is not used by the operator")
}

func (a *fakeAgent) PutFiles(context.Context, types.NamespacedName, string, io.Reader) error {
	return errors.New("fake agent: PutFiles is not used by the operator")
}

func (a *fakeAgent) GetFiles(context.Context, types.NamespacedName, string, int64, io.Writer) error {
	return errors.New("fake agent: GetFiles is not used by the operator")
}

// Delivered takes the mark: the real agent's handling of it is
// TestRealAgentSpoolRoom's.
func (a *fakeAgent) Delivered(context.Context, types.NamespacedName, string) error { return nil }

func (a *fakeAgent) Hangup(context.Context, types.NamespacedName, string, string) error {
	return errors.New("fake agent: Hangup is not used by the operator's controllers")
}

var _ agentapi.Client = &fakeAgent{}

// command is the command that the job's Start gave the agent, "" if none.
func (a *fakeAgent) command(uid types.UID) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pods {
		if j, ok := p.jobs[string(uid)]; ok {
			return j.req.Command
		}
	}
	return ""
}
