package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/agent/agenttest"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// realAgents runs one real agent daemon per worker pod, on this machine:
// the tests below run real commands in real zsh, with real signals, with
// the API server of envtest.
type realAgents struct {
	*agenttest.Pods
	t *testing.T
}

func newRealAgents(t *testing.T) *realAgents { return &realAgents{agenttest.NewPods(t), t} }

// serve starts the daemon of a worker pod and waits until it answers.
func (r *realAgents) serve(pod *corev1.Pod) {
	if err := r.Serve(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}); err != nil {
		r.t.Fatal(err)
	}
}

// output reads a job's output from its agent.
func (r *realAgents) output(t *testing.T, j *shellv1alpha1.ShellJob) string {
	t.Helper()
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if _, err := r.Follow(ctx, podKey(j), string(j.UID), 0, &b); err != nil {
		t.Fatalf("follow %s: %v", j.Name, err)
	}
	return b.String()
}

// TestRealAgent runs the behaviour the design asks of a stop, a trap and
// a stateful shell through the real agent.
func TestRealAgent(t *testing.T) {
	ns := namespace(t)
	agents := newRealAgents(t)
	startOperator(t, ns, agents)
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(2).Obj()
	if err := env.Client.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for _, pod := range markWorkersReady(t, ns, "shell", 2) {
		agents.serve(&pod)
	}

	signals := func(j *shellv1alpha1.ShellJob) []shellv1alpha1.Signal {
		var out []shellv1alpha1.Signal
		for _, s := range j.Status.StopSteps {
			out = append(out, s.Signal)
		}
		return out
	}
	// A job to stop says "ready" from the process that then sleeps, once
	// zsh has forked it: a SIGINT that comes between zsh's own print and
	// the exec of sleep is lost by zsh (seen with plain zsh, no agent:
	// most of 200 tries hung, a few printed "ready" twice).
	cases := []struct {
		name, command string
		mode          shellv1alpha1.ShellJobMode
		stop          bool
		phase         shellv1alpha1.ShellJobPhase
		exit          int32
		output        string
		signals       []shellv1alpha1.Signal
	}{
		{name: "echo", command: "echo hi", phase: shellv1alpha1.PhaseSucceeded, exit: 0, output: "hi\n"},
		{name: "exit", command: "exit 3", phase: shellv1alpha1.PhaseFailed, exit: 3},
		{name: "sleep", command: "sh -c 'echo ready; exec sleep 100'", stop: true, phase: shellv1alpha1.PhaseStopped, exit: 130,
			output: "ready\n", signals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT}},
		{name: "ignore-int", command: "trap '' INT; sh -c 'echo ready; exec sleep 100'", stop: true, phase: shellv1alpha1.PhaseStopped, exit: 143,
			output: "ready\n", signals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}},
		{name: "trap", command: "trap 'print goodbye; exit 7' INT; sh -c 'echo ready; exec sleep 100'", stop: true, phase: shellv1alpha1.PhaseStopped,
			exit: 7, output: "ready\ngoodbye\n", signals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT}},
		// The shell ends at once; its background sleep says ready once
		// the shell has gone ($$ is the shell's pid in zsh's subshells),
		// so that the stop meets the sleep alone, whose SIGINT is ignored
		// (an asynchronous command of a non-interactive shell).
		{name: "background", command: "{ while kill -0 $$ 2>/dev/null; do sleep 0.05; done; print ready; exec sleep 100 } &", stop: true, phase: shellv1alpha1.PhaseStopped, exit: 0,
			output: "ready\n", signals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}},
		// The mode reaches the agent: the command runs on a terminal,
		// which ends its lines in \r\n.
		{name: "console", command: "[[ -t 0 && -t 1 ]] && print terminal", mode: shellv1alpha1.ModeConsole, phase: shellv1alpha1.PhaseSucceeded,
			output: "terminal\r\n"},
		{name: "stateful-cd", command: "cd /tmp; X=42", mode: shellv1alpha1.ModeStateful, phase: shellv1alpha1.PhaseSucceeded},
		{name: "stateful-pwd", command: `print -r -- "$PWD $X"`, mode: shellv1alpha1.ModeStateful, phase: shellv1alpha1.PhaseSucceeded,
			output: "/tmp 42\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			createJob(t, utiltesting.MakeShellJob(tc.name, ns).Command(tc.command).Mode(tc.mode))
			if tc.stop {
				waitPhase(t, ns, tc.name, shellv1alpha1.PhaseRunning)
				// Let the command reach its sleep (and set its traps).
				eventually(t, waitShort, "ready printed", func() (bool, string) {
					got := getJob(t, ns, tc.name)
					var b bytes.Buffer
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					_, _ = agents.Follow(ctx, podKey(got), string(got.UID), 0, &limitWriter{&b, len("ready")})
					return strings.HasPrefix(b.String(), "ready"), b.String()
				})
				stopJob(t, ns, tc.name, "")
			}
			got := waitPhase(t, ns, tc.name, tc.phase)
			if ptr.Deref(got.Status.ExitCode, -1) != tc.exit {
				t.Errorf("exit %d, want %d (status %+v)", ptr.Deref(got.Status.ExitCode, -1), tc.exit, got.Status)
			}
			if diff := cmp.Diff(tc.signals, signals(got)); diff != "" {
				t.Errorf("signals (-want +got):\n%s", diff)
			}
			if out := agents.output(t, got); out != tc.output {
				t.Errorf("output %q, want %q", out, tc.output)
			}
		})
	}
}

// TestRealAgentFiles: the status records how many files, and bytes, the
// command left in $SHELLJOB_OUT, none included, as the agent counted them.
func TestRealAgentFiles(t *testing.T) {
	ns := namespace(t)
	agents := newRealAgents(t)
	startOperator(t, ns, agents)
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(1).Obj()
	if err := env.Client.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for _, pod := range markWorkersReady(t, ns, "shell", 1) {
		agents.serve(&pod)
	}
	for name, tc := range map[string]struct {
		command string
		want    shellv1alpha1.ShellJobFiles
	}{
		"none": {command: "echo hi"},
		"some": {command: `mkdir -p $SHELLJOB_OUT/d/e && print -n abc > $SHELLJOB_OUT/d/e/f && print -n de > $SHELLJOB_OUT/g`,
			want: shellv1alpha1.ShellJobFiles{Count: 2, Bytes: 5}},
	} {
		t.Run(name, func(t *testing.T) {
			createJob(t, utiltesting.MakeShellJob(name, ns).Command(tc.command))
			got := waitPhase(t, ns, name, shellv1alpha1.PhaseSucceeded)
			if got.Status.Files == nil || *got.Status.Files != tc.want {
				t.Errorf("files %+v, want %+v", got.Status.Files, tc.want)
			}
		})
	}
}

// limitWriter takes n bytes, then fails, so a Follow of a running job
// returns once it has them.
type limitWriter struct {
	b *bytes.Buffer
	n int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	n, _ := w.b.Write(p)
	if w.b.Len() >= w.n {
		return n, errors.New("enough")
	}
	return n, nil
}

// TestStopEndsWithGroup: a job whose group empties at SIGTERM ends then,
// not a grace later, with the default 2 s between signals, and keeps all
// its output. Workers live in a namespace of their own.
func TestStopEndsWithGroup(t *testing.T) {
	ns, wns := namespace(t), env.Namespace(t, "w")
	agents := newRealAgents(t)
	startOperatorWith(t, ns, Options{Agent: agents, WorkerNamespace: wns})
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(1).Obj()
	if err := env.Client.Create(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for _, pod := range markWorkersReadyIn(t, ns, wns, "shell", 1) {
		agents.serve(&pod)
	}
	createJob(t, utiltesting.MakeShellJob("stubborn", ns).Command("trap '' INT; print ready; sleep 100"))
	waitPhase(t, ns, "stubborn", shellv1alpha1.PhaseRunning)
	eventually(t, waitShort, "ready printed", func() (bool, string) {
		got := getJob(t, ns, "stubborn")
		var b bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		key := types.NamespacedName{Namespace: wns, Name: got.Status.Pod}
		_, _ = agents.Follow(ctx, key, string(got.UID), 0, &limitWriter{&b, len("ready")})
		return strings.HasPrefix(b.String(), "ready"), b.String()
	})
	stopJob(t, ns, "stubborn", "")
	eventually(t, 3*waitShort, "job stopped", func() (bool, string) {
		j := getJob(t, ns, "stubborn")
		return j.Status.Phase == shellv1alpha1.PhaseStopped, string(j.Status.Phase)
	})
	j := getJob(t, ns, "stubborn")
	if ptr.Deref(j.Status.ExitCode, -1) != 143 {
		t.Errorf("exit %v, want 143", j.Status.ExitCode)
	}
	steps := j.Status.StopSteps
	t.Logf("stop steps %+v, completed %v", steps, j.Status.CompletionTime)
	if len(steps) != 2 || steps[1].Signal != shellv1alpha1.SIGTERM || !steps[1].GroupEmpty {
		t.Fatalf("stop steps %+v, want SIGINT then a SIGTERM that emptied the group", steps)
	}
	// Times in status are whole seconds: a job that ends with its group is
	// at most a second past the step, one that waits a grace is two or more.
	if after := j.Status.CompletionTime.Sub(steps[1].Time.Time); after > 1500*time.Millisecond {
		t.Errorf("completed %v after the SIGTERM that emptied its group", after)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if _, err := agents.Follow(ctx, types.NamespacedName{Namespace: wns, Name: j.Status.Pod}, string(j.UID), 0, &out); err != nil || out.String() != "ready\n" {
		t.Errorf("output %q, %v; want all of it", out.String(), err)
	}
}

// TestRealAgentSpoolRoom: a worker whose spool the output of undelivered
// jobs fills takes no new job, which waits saying why (SpoolFull) while
// the pool's SpoolRoom condition says which worker; once the jobs are
// marked delivered, as the bot marks them, the operator tells the agent,
// whose spools make room, and the waiting job runs. The pool says its
// jobs run in namespaces of their own, as the real agent reports.
func TestRealAgentSpoolRoom(t *testing.T) {
	ns := namespace(t)
	agents := newRealAgents(t)
	startOperator(t, ns, agents)
	ctx := context.Background()
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(1).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// A job's output takes at most 176 KiB there, within 15/16 of 1 MiB.
	for _, pod := range markWorkersReady(t, ns, "shell", 1) {
		if err := agents.Serve(client.ObjectKeyFromObject(&pod), "--spool-size-limit=1048576",
			"--head-bytes=65536", "--tail-bytes=65536", "--after-stop-bytes=16384", "--chunk-bytes=16384"); err != nil {
			t.Fatal(err)
		}
	}
	const big = `head -c 300000 /dev/zero | tr '\0' x`
	var filled []string
	for i := 0; ; i++ {
		name := fmt.Sprintf("filler-%d", i)
		createJob(t, utiltesting.MakeShellJob(name, ns).Command(big))
		eventually(t, 3*waitShort, name+" ended or waiting for room", func() (bool, string) {
			j := getJob(t, ns, name)
			c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
			return j.Status.Phase == shellv1alpha1.PhaseSucceeded || c != nil && c.Reason == shellv1alpha1.ShellJobScheduledReasonSpoolFull,
				fmt.Sprintf("%s %+v", j.Status.Phase, c)
		})
		if getJob(t, ns, name).Status.Phase != shellv1alpha1.PhaseSucceeded {
			break
		}
		filled = append(filled, name)
		if i > 10 {
			t.Fatal("the worker never filled")
		}
	}
	waiting := fmt.Sprintf("filler-%d", len(filled))
	eventually(t, waitShort, "the pool saying its worker is full", func() (bool, string) {
		p := getPool(t, ns, "shell")
		c := meta.FindStatusCondition(p.Status.Conditions, shellv1alpha1.ShellPoolSpoolRoom)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == shellv1alpha1.ShellPoolSpoolRoomReasonSpoolFull, fmt.Sprintf("%+v", c)
	})
	if c := meta.FindStatusCondition(getPool(t, ns, "shell").Status.Conditions, shellv1alpha1.ShellPoolJobsIsolated); c == nil ||
		c.Status != metav1.ConditionTrue {
		t.Errorf("JobsIsolated %+v, want True: the real agent runs jobs in namespaces of their own", c)
	}
	for _, name := range filled {
		j := getJob(t, ns, name)
		from := j.DeepCopy()
		metav1.SetMetaDataAnnotation(&j.ObjectMeta, shellv1alpha1.AnnotationDelivered, time.Now().UTC().Format(time.RFC3339))
		if err := env.Client.Patch(ctx, j, client.MergeFrom(from)); err != nil {
			t.Fatal(err)
		}
	}
	if got := waitPhase(t, ns, waiting, shellv1alpha1.PhaseSucceeded); got.Status.OutputBytes != 300000 {
		t.Errorf("the job that waited for room: %+v", got.Status)
	}
	eventually(t, waitShort, "the pool saying its worker has room", func() (bool, string) {
		c := meta.FindStatusCondition(getPool(t, ns, "shell").Status.Conditions, shellv1alpha1.ShellPoolSpoolRoom)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
}
