//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/agent/agenttest"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/identity"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// The tests run in this order, on one cluster. Each leaves the e2e pool
// idle and ready.

func TestPoolComesUp(t *testing.T) {
	pool := EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	if got, want := pool.Status.Ready, fmt.Sprintf("%d/%d", PoolSize, PoolSize); got != want {
		t.Errorf("ready %s, want %s", got, want)
	}
	for _, pod := range workerPods(t, Pool, pool.Status.Revision) {
		if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
			t.Errorf("worker %s mounts an API token", pod.Name)
		}
	}
}

func TestEchoHi(t *testing.T) {
	j := Create(t, Job(t, "echo", "echo hi"))[0]
	j = WaitForJobEnd(t, j, JobTimeout)
	if j.Status.Phase != shellv1alpha1.PhaseSucceeded || ExitCode(j) != 0 {
		t.Fatalf("phase %s, exit %d: want Succeeded, 0", j.Status.Phase, ExitCode(j))
	}
	if out := Output(t, j); out != "hi\n" {
		t.Errorf("output %q, want %q", out, "hi\n")
	}
	if j.Status.OutputBytes != 3 || j.Status.Number == 0 || j.Status.Summary != "echo hi" {
		t.Errorf("output bytes %d, number %d, summary %q", j.Status.OutputBytes, j.Status.Number, j.Status.Summary)
	}
	// kubectl tells the story.
	list := run(t, "-n", Namespace, "get", "sj", j.Name)
	for _, col := range []string{"#", "POOL", "MODE", "PHASE", "EXIT", "COMMAND", "Succeeded", "echo hi"} {
		if !strings.Contains(list, col) {
			t.Errorf("kubectl get sj lacks %q:\n%s", col, list)
		}
	}
	poll(t, JobTimeout, "Events in kubectl describe", func() (bool, string) {
		desc := run(t, "-n", Namespace, "describe", "sj", j.Name)
		for _, reason := range []string{"Events:", "Queued", "Scheduled", "Started", "Succeeded"} {
			if !strings.Contains(desc, reason) {
				return false, desc
			}
		}
		return true, ""
	})
	t.Logf("kubectl get sj:\n%s", list)
}

func TestExit3(t *testing.T) {
	j := WaitForJobEnd(t, Create(t, Job(t, "exit", "exit 3"))[0], JobTimeout)
	if j.Status.Phase != shellv1alpha1.PhaseFailed || ExitCode(j) != 3 {
		t.Errorf("phase %s, exit %d: want Failed, 3", j.Status.Phase, ExitCode(j))
	}
}

// TestStopSleep: SIGINT ends `sleep 100` with 130 at once, before the
// SIGTERM step.
func TestStopSleep(t *testing.T) {
	j := WaitForJobPhase(t, Create(t, Job(t, "sleep", "sleep 100"))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	stopped := Stop(t, j)
	j = WaitForJobEnd(t, j, JobTimeout)
	took := time.Since(stopped)
	t.Logf("stopped in %v", took)
	if j.Status.Phase != shellv1alpha1.PhaseStopped || ExitCode(j) != 130 {
		t.Errorf("phase %s, exit %d: want Stopped, 130", j.Status.Phase, ExitCode(j))
	}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT}, Signals(j)); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if took > 2*time.Second {
		t.Errorf("took %v: it should end at SIGINT, before the SIGTERM step 2 s later", took)
	}
}

// TestLongestCommands: commands of the API's limit, plain and almost six
// times longer once JSON-escaped, run in a fresh and in the pool's shell.
func TestLongestCommands(t *testing.T) {
	for _, mode := range []shellv1alpha1.ShellJobMode{shellv1alpha1.ModeFork, shellv1alpha1.ModeStateful} {
		for name, build := range map[string]func(int) (string, string){"plain": agenttest.PlainCommand, "escaped": agenttest.EscapedCommand} {
			t.Run(string(mode)+"/"+name, func(t *testing.T) {
				cmd, want := build(agenttest.MaxCommand)
				j := WaitForJobEnd(t, Create(t, Job(t, "long", cmd).Mode(mode))[0], JobTimeout)
				if j.Status.Phase != shellv1alpha1.PhaseSucceeded || ExitCode(j) != 0 {
					t.Fatalf("phase %s, exit %d: want Succeeded, 0", j.Status.Phase, ExitCode(j))
				}
				if got := Output(t, j); got != want {
					t.Errorf("output: %d bytes, want %d", len(got), len(want))
				}
			})
		}
	}
}

// TestStopTrapIgnoresINT: a command that ignores SIGINT ends at SIGTERM,
// about 2 s after the stop, with 143.
func TestStopTrapIgnoresINT(t *testing.T) {
	j := WaitForJobPhase(t, Create(t, Job(t, "trap", "trap '' INT; sleep 100"))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	stopped := Stop(t, j)
	j = WaitForJobEnd(t, j, JobTimeout)
	took := time.Since(stopped)
	t.Logf("stopped in %v", took)
	if j.Status.Phase != shellv1alpha1.PhaseStopped || ExitCode(j) != 143 {
		t.Errorf("phase %s, exit %d: want Stopped, 143", j.Status.Phase, ExitCode(j))
	}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, Signals(j)); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if took < 1500*time.Millisecond || took > 5*time.Second {
		t.Errorf("took %v, want about 2 s", took)
	}
}

// TestTrapOutputKept: what a trap prints on SIGINT is kept, and its exit
// status is the job's.
func TestTrapOutputKept(t *testing.T) {
	j := Create(t, Job(t, "goodbye", "trap 'print goodbye; exit 7' INT; print ready; sleep 100"))[0]
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	Stop(t, j)
	j = WaitForJobEnd(t, j, JobTimeout)
	if j.Status.Phase != shellv1alpha1.PhaseStopped || ExitCode(j) != 7 {
		t.Errorf("phase %s, exit %d: want Stopped, 7", j.Status.Phase, ExitCode(j))
	}
	if out := Output(t, j); out != "ready\ngoodbye\n" {
		t.Errorf("output %q, want the trap's goodbye", out)
	}
}

// TestBackgroundHoldsOutput: a background job that holds the output keeps
// the job running after its shell exited, ignores SIGINT as background
// jobs of a non-interactive shell do, and ends at SIGTERM.
func TestBackgroundHoldsOutput(t *testing.T) {
	j := Create(t, Job(t, "bg", "sleep 100 & print started"))[0]
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	time.Sleep(time.Second)
	if j = Get(t, j); j.Status.Phase != shellv1alpha1.PhaseRunning {
		t.Fatalf("phase %s: the background sleep holds the output, so the job runs", j.Status.Phase)
	}
	Stop(t, j)
	j = WaitForJobEnd(t, j, JobTimeout)
	if j.Status.Phase != shellv1alpha1.PhaseStopped {
		t.Errorf("phase %s, want Stopped", j.Status.Phase)
	}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, Signals(j)); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
}

// TestFIFO: 20 jobs on the 4-worker pool all finish; they get workers in
// the order they were created, and none starts before an older one got its
// worker. Starts of jobs placed in one pass run in parallel, each an exec
// into its worker, so they may complete in any order.
func TestFIFO(t *testing.T) {
	const n = 20
	var ws []*utiltesting.ShellJobWrapper
	for i := range n {
		w := Job(t, "fifo", "zmodload zsh/datetime; print -r -- $EPOCHREALTIME; sleep 0.5")
		w.Name = fmt.Sprintf("fifo-%02d-%s", i, w.Name[len("fifo-"):])
		ws = append(ws, w)
	}
	jobs := Create(t, ws...)
	var starts []float64
	for _, j := range jobs {
		j = WaitForJobEnd(t, j, 3*JobTimeout)
		if j.Status.Phase != shellv1alpha1.PhaseSucceeded {
			t.Fatalf("%s: phase %s", j.Name, j.Status.Phase)
		}
		at, err := strconv.ParseFloat(strings.TrimSpace(Output(t, j)), 64)
		if err != nil {
			t.Fatalf("%s: start time: %v", j.Name, err)
		}
		starts = append(starts, at)
	}
	placed := EventTimes(t, "Scheduled")
	var placedAt []float64
	for _, j := range jobs {
		at, ok := placed[j.Name]
		if !ok {
			t.Fatalf("%s: no Scheduled event", j.Name)
		}
		placedAt = append(placedAt, float64(at.UnixMicro())/1e6)
	}
	for k := 1; k < n; k++ {
		if placedAt[k] < placedAt[k-1] {
			t.Errorf("%s got a worker %.3f s before the older %s", jobs[k].Name, placedAt[k-1]-placedAt[k], jobs[k-1].Name)
		}
		for i := range k {
			if starts[k] < placedAt[i] {
				t.Errorf("%s started %.3f s before the older %s got a worker", jobs[k].Name, placedAt[i]-starts[k], jobs[i].Name)
			}
		}
	}
	t.Logf("placed, s after the first: %v", relative(placedAt))
	t.Logf("started, s after the first placement: %v", relativeTo(starts, placedAt[0]))
}

func relative(ts []float64) []string { return relativeTo(ts, ts[0]) }

func relativeTo(ts []float64, t0 float64) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprintf("%.2f", t-t0)
	}
	return out
}

// TestStopQueuedNeverRuns: a job stopped while it waits for a worker ends
// at once and never runs, even once a worker is free.
func TestStopQueuedNeverRuns(t *testing.T) {
	busy := FillPool(t)
	q := Create(t, Job(t, "queued", "echo never"))[0]
	poll(t, JobTimeout, "the job waits", func() (bool, string) {
		q = Get(t, q)
		return q.Status.Number != 0 && q.Status.Pod == "", q.Status.Pod
	})
	Stop(t, q)
	q = WaitForJobEnd(t, q, JobTimeout)
	if q.Status.Phase != shellv1alpha1.PhaseStopped || q.Status.Ran || FinishedReason(q) != shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun {
		t.Errorf("phase %s, ran %v, reason %s: want Stopped before it ran", q.Status.Phase, q.Status.Ran, FinishedReason(q))
	}
	StopAll(t, busy)
	time.Sleep(2 * time.Second)
	if q = Get(t, q); q.Status.Ran || q.Status.Pod != "" {
		t.Errorf("the stopped job ran after all: pod %q", q.Status.Pod)
	}
}

// TestStateful: Stateful jobs share the stateful worker's shell: cd and
// variables carry over.
func TestStateful(t *testing.T) {
	first := Create(t, Job(t, "cd", "cd /tmp; X=42").Mode(shellv1alpha1.ModeStateful))[0]
	first = WaitForJobEnd(t, first, JobTimeout)
	second := Create(t, Job(t, "pwd", `print -r -- "$PWD $X"`).Mode(shellv1alpha1.ModeStateful))[0]
	second = WaitForJobEnd(t, second, JobTimeout)
	if first.Status.Phase != shellv1alpha1.PhaseSucceeded || second.Status.Phase != shellv1alpha1.PhaseSucceeded {
		t.Fatalf("phases %s, %s", first.Status.Phase, second.Status.Phase)
	}
	if first.Status.Pod != second.Status.Pod || !strings.HasSuffix(first.Status.Pod, "-0") {
		t.Errorf("pods %s, %s: want the stateful worker 0 both times", first.Status.Pod, second.Status.Pod)
	}
	if out := Output(t, second); out != "/tmp 42\n" {
		t.Errorf("output %q, want %q", out, "/tmp 42\n")
	}
}

// TestDirectWhileBusy: a Direct job runs at once while every worker is busy.
func TestDirectWhileBusy(t *testing.T) {
	busy := FillPool(t)
	d := Create(t, Job(t, "direct", "echo direct").Mode(shellv1alpha1.ModeDirect))[0]
	d = WaitForJobEnd(t, d, JobTimeout)
	if d.Status.Phase != shellv1alpha1.PhaseSucceeded || Output(t, d) != "direct\n" {
		t.Errorf("phase %s: want Succeeded with output direct", d.Status.Phase)
	}
	for _, b := range busy {
		if b = Get(t, b); b.Status.Phase != shellv1alpha1.PhaseRunning {
			t.Errorf("%s: phase %s, want still Running", b.Name, b.Status.Phase)
		}
	}
	StopAll(t, busy)
}

// TestWorkerDeleted: a job whose worker pod is deleted ends as WorkerLost,
// and the pool makes a new worker.
func TestWorkerDeleted(t *testing.T) {
	j := WaitForJobPhase(t, Create(t, Job(t, "lost", "sleep 300"))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	run(t, "-n", WorkerNamespace, "delete", "pod", j.Status.Pod, "--wait=false")
	j = WaitForJobEnd(t, j, JobTimeout)
	if j.Status.Phase != shellv1alpha1.PhaseFailed || FinishedReason(j) != shellv1alpha1.ShellJobFinishedReasonWorkerLost {
		t.Errorf("phase %s, reason %s: want Failed, WorkerLost", j.Status.Phase, FinishedReason(j))
	}
	if msg := run(t, "-n", Namespace, "get", "sj", j.Name, "-o", "jsonpath={.status.conditions[?(@.type=='Finished')].message}"); !strings.Contains(msg, "was deleted while the command ran") {
		t.Errorf("message %q does not say the worker was deleted", msg)
	}
	WaitForPoolAvailable(t, Pool)
}

// TestPoolRestart: a restart lets running jobs finish on the old workers,
// runs the queued ones on the new revision, and deletes the old workers
// once their jobs ended.
func TestPoolRestart(t *testing.T) {
	const name, size = "e2e-restart", 2
	ctx := context.Background()
	old := EnsurePool(t, EnsurePoolInput{Name: name, Replicas: size}).Status.Revision
	var running, queued []*shellv1alpha1.ShellJob
	for i := range size {
		running = append(running, Create(t, Job(t, fmt.Sprintf("old%d", i), "sleep 25; print old").Pool(name))[0])
	}
	for i, j := range running {
		running[i] = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	}
	for i := range size {
		queued = append(queued, Create(t, Job(t, fmt.Sprintf("new%d", i), "print new").Pool(name))[0])
	}
	pool := &shellv1alpha1.ShellPool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, pool); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.RestartedAt = now()
	if err := c.Patch(ctx, pool, patch); err != nil {
		t.Fatal(err)
	}
	for _, q := range queued {
		q = WaitForJobEnd(t, q, PoolReadyTimeout)
		if q.Status.Phase != shellv1alpha1.PhaseSucceeded || q.Status.Revision == old {
			t.Errorf("%s: phase %s on revision %s: want Succeeded on the new revision", q.Name, q.Status.Phase, q.Status.Revision)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
		t.Fatal(err)
	}
	want := []shellv1alpha1.OldRevision{{Revision: old, Pods: size, RunningJobs: size}}
	if diff := cmp.Diff(want, pool.Status.OldRevisions); diff != "" {
		t.Errorf("old revisions while the old jobs run (-want +got):\n%s", diff)
	}
	for _, r := range running {
		if r = Get(t, r); r.Status.Phase != shellv1alpha1.PhaseRunning {
			t.Errorf("%s: phase %s, want still Running on the old worker", r.Name, r.Status.Phase)
		}
	}
	for _, r := range running {
		r = WaitForJobEnd(t, r, JobTimeout)
		// The old worker waits for the output to be delivered.
		if r.Status.Phase != shellv1alpha1.PhaseSucceeded || Output(t, r) != "old\n" {
			t.Errorf("%s: phase %s, want Succeeded with output old", r.Name, r.Status.Phase)
		}
	}
	if pods := workerPods(t, name, old); len(pods) != size {
		t.Errorf("%d old workers before the delivery, want %d", len(pods), size)
	}
	for _, j := range append(running, queued...) {
		Deliver(t, j)
	}
	poll(t, JobTimeout, "the old workers deleted", func() (bool, string) {
		pods := workerPods(t, name, old)
		return len(pods) == 0, fmt.Sprintf("%d old pods", len(pods))
	})
	WaitForPoolAvailable(t, name)
	if err := c.Delete(ctx, pool); err != nil {
		t.Error(err)
	}
}

// TestOperatorKilled: killing the operator while jobs run loses nothing: a
// job that ends while it is down is recorded, a stop asked for meanwhile
// happens, and a job created meanwhile runs.
func TestOperatorKilled(t *testing.T) {
	jobs := Create(t, Job(t, "ends", "sleep 5; print done"), Job(t, "stopped", "sleep 300"))
	ends := WaitForJobPhase(t, jobs[0], JobTimeout, shellv1alpha1.PhaseRunning)
	stopped := WaitForJobPhase(t, jobs[1], JobTimeout, shellv1alpha1.PhaseRunning)

	run(t, "-n", Namespace, "delete", "pod", "-l", "app.kubernetes.io/name=shelljob-operator", "--grace-period=0", "--force")
	Stop(t, stopped)
	created := Create(t, Job(t, "meanwhile", "print meanwhile"))[0]

	ends = WaitForJobEnd(t, ends, OperatorRestartTimeout)
	if ends.Status.Phase != shellv1alpha1.PhaseSucceeded || Output(t, ends) != "done\n" {
		t.Errorf("%s: phase %s, want Succeeded with output done", ends.Name, ends.Status.Phase)
	}
	stopped = WaitForJobEnd(t, stopped, OperatorRestartTimeout)
	if stopped.Status.Phase != shellv1alpha1.PhaseStopped || ExitCode(stopped) != 130 {
		t.Errorf("%s: phase %s, exit %d: want Stopped, 130", stopped.Name, stopped.Status.Phase, ExitCode(stopped))
	}
	created = WaitForJobEnd(t, created, OperatorRestartTimeout)
	if created.Status.Phase != shellv1alpha1.PhaseSucceeded || Output(t, created) != "meanwhile\n" {
		t.Errorf("%s: phase %s", created.Name, created.Status.Phase)
	}
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(Namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "shelljob-operator"}); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp == nil }); i < 0 {
		t.Errorf("no operator pod after the kill")
	}
	// The killed operator never closed its control channels' execs; each
	// ends once its pings stop (agentapi.ControlKeepalive), and each worker
	// is left with the new operator's channel alone (none with the
	// channels off).
	for _, pod := range slices.Compact([]string{ends.Status.Pod, stopped.Status.Pod, created.Status.Pod}) {
		poll(t, 3*time.Minute, "one control channel on "+pod, func() (bool, string) {
			out, _ := kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--",
				"pgrep", "-c", "-f", operatorChannel).Output()
			n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
			return n <= 1, fmt.Sprintf("%d operator control processes", n)
		})
	}
}

// operatorChannel matches the operator's control channel processes in a
// worker, not a reader's (the bot's end in --no-events), for pgrep -f.
const operatorChannel = "shelljob-agent control --protocol=[0-9]+$"

// TestWarmChannelCut: the operator's warm control channels to two workers
// cut mid-job (the agent's control process killed in each pod) lose
// nothing: a stop of a job that ignores SIGINT still escalates, a job that
// ends meanwhile is recorded with its output, and the channels come back.
// With the channels off (operator.warmChannels=false) there is nothing to
// cut, and the test is skipped.
func TestWarmChannelCut(t *testing.T) {
	jobs := Create(t, Job(t, "cut-trap", "trap '' INT; sleep 100"), Job(t, "cut-ends", "sleep 3; print done"))
	trap := WaitForJobPhase(t, jobs[0], JobTimeout, shellv1alpha1.PhaseRunning)
	ends := WaitForJobPhase(t, jobs[1], JobTimeout, shellv1alpha1.PhaseRunning)
	pods := slices.Compact([]string{trap.Status.Pod, ends.Status.Pod})
	const control = operatorChannel
	inPod := func(pod string, args ...string) error {
		return kubectlCmd(append([]string{"-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--"}, args...)...).Run()
	}
	for _, pod := range pods {
		if inPod(pod, "pgrep", "-f", control) != nil {
			t.Skipf("no control channel runs on %s: warm channels are off", pod)
		}
	}
	for _, pod := range pods {
		if err := inPod(pod, "pkill", "-KILL", "-f", control); err != nil {
			t.Fatalf("cut the channel of %s: %v", pod, err)
		}
	}
	Stop(t, trap)

	trap = WaitForJobEnd(t, trap, JobTimeout)
	if trap.Status.Phase != shellv1alpha1.PhaseStopped || ExitCode(trap) != 143 {
		t.Errorf("%s: phase %s, exit %d: want Stopped, 143", trap.Name, trap.Status.Phase, ExitCode(trap))
	}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, Signals(trap)); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	ends = WaitForJobEnd(t, ends, JobTimeout)
	if ends.Status.Phase != shellv1alpha1.PhaseSucceeded || Output(t, ends) != "done\n" {
		t.Errorf("%s: phase %s, want Succeeded with output done", ends.Name, ends.Status.Phase)
	}
	for _, pod := range pods {
		poll(t, JobTimeout, "the control channel of "+pod+" back", func() (bool, string) {
			return inPod(pod, "pgrep", "-f", control) == nil, "no control process"
		})
	}
}

// TestReadersGoneJobStillEnds: stock containerd never stops an exec whose
// client went away. A job whose readers all left still ends once stopped,
// and leaves no process behind: neither the command's nor its reader's.
func TestReadersGoneJobStillEnds(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	j := WaitForJobPhase(t, Create(t, Job(t, "readers", "echo started; sleep 1000"))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	follow := kubectlCmd("-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer, "--",
		agentapi.AgentPath, agentapi.CmdFollow, agentapi.FlagJob, string(j.UID))
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := out.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "started") {
		t.Fatalf("the reader read %q, %v", buf[:n], err)
	}
	_ = follow.Process.Kill()
	_ = follow.Wait()
	Stop(t, j)
	if j = WaitForJobEnd(t, j, JobTimeout); j.Status.Phase != shellv1alpha1.PhaseStopped {
		t.Errorf("phase %s, want Stopped", j.Status.Phase)
	}
	poll(t, JobTimeout, "no process of the job or of its reader in "+j.Status.Pod, func() (bool, string) {
		ps := run(t, "-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer, "--", "ps", "-eo", "pid,args")
		return !strings.Contains(ps, "sleep 1000") && !strings.Contains(ps, string(j.UID)), ps
	})
}

// TestOriginCannotBeForged: the chart's admission policy ties a job's
// origin to the account that creates it, and the API server fills in the
// user of a CLI job that names none: a Telegram job comes only from the
// bot acting for its sender (the Telegram user extra only the bot may
// impersonate; here the test's admin does). Every create is a dry run:
// the policies answer, and nothing runs.
func TestOriginCannotBeForged(t *testing.T) {
	impersonating := func(imp rest.ImpersonationConfig) client.Client {
		cfg := rest.CopyConfig(restConfig)
		cfg.Impersonate = imp
		cl, err := client.New(cfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	botClient := impersonating(rest.ImpersonationConfig{UserName: "system:serviceaccount:" + Namespace + ":shelljob-bot"})
	// alice as the bot impersonates a chat admin; the chart lets every chat
	// admin use its bot.pool, shell.
	alice := impersonating(identity.Identity{TelegramUser: 42, User: "alice", Groups: []string{identity.Group}}.Impersonation())
	aliceCLI := impersonating(rest.ImpersonationConfig{UserName: "alice", Groups: []string{identity.Group}})
	telegram := shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "alice", TelegramUser: 42, Chat: 42, Message: 1}
	const onlyBot = "only the shelljob bot creates jobs from Telegram"
	cases := []struct {
		name   string
		as     client.Client
		origin shellv1alpha1.ShellJobOrigin
		refuse string
		// user is the origin's user the API server stores, if it stores it.
		user string
	}{
		{"the CLI as its own user", c, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: Username}, "", Username},
		{"the CLI naming no user", c, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI}, "", Username},
		{"the CLI as another user", c, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "alice"}, "must be the user who creates it", ""},
		{"Telegram from the admin", c, telegram, onlyBot, ""},
		{"Telegram from alice's own credentials", aliceCLI, telegram, onlyBot, ""},
		{"Telegram from the bot as itself", botClient, telegram, `cannot create resource "shelljobs"`, ""},
		{"Telegram from the bot acting for alice", alice, telegram, "", "alice"},
		{"the CLI from the bot as a user", botClient, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "alice"}, `cannot create resource "shelljobs"`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := Job(t, "origin", "true").Origin(tc.origin).Pool(shellv1alpha1.DefaultPool).Obj()
			err := tc.as.Create(context.Background(), j, client.DryRunAll)
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && (!apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(fmt.Sprint(err), tc.refuse)):
				t.Errorf("create: %v, want it refused with %q", err, tc.refuse)
			case err == nil && j.Spec.Origin.User != tc.user:
				t.Errorf("stored origin %+v, want user %q", j.Spec.Origin, tc.user)
			}
		})
	}
}

// TestJobsIsolated: a job on the same worker as another, running or ended,
// cannot list, read, write into or signal it, nor reach the agent.
func TestJobsIsolated(t *testing.T) {
	const pool = "e2e-isolate"
	sp := EnsurePool(t, EnsurePoolInput{Name: pool, Replicas: 1})
	t.Cleanup(func() { _ = c.Delete(context.Background(), sp) })
	ended := WaitForJobEnd(t, Create(t, Job(t, "ended", `echo ended-secret; echo ended-file > "$SHELLJOB_OUT/secret"`).Pool(pool))[0], JobTimeout)
	victim := WaitForJobPhase(t, Create(t, Job(t, "victim",
		`echo victim-file > "$SHELLJOB_OUT/secret"; echo victim-secret; sleep 300`).Pool(pool))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	jobs := agentapi.SpoolDir + "/jobs"
	var probes strings.Builder
	fmt.Fprintf(&probes, "probe() { if eval \"$2\" >/dev/null 2>&1; then echo \"$1: allowed\"; else echo \"$1: denied\"; fi; }\n")
	fmt.Fprintf(&probes, "probe list 'ls %s'\n", jobs)
	for _, j := range []*shellv1alpha1.ShellJob{ended, victim} {
		dir := jobs + "/" + string(j.UID)
		fmt.Fprintf(&probes, "probe %[1]s-output 'cat %[2]s/output/*'\n", j.Name, dir)
		fmt.Fprintf(&probes, "probe %[1]s-file 'cat %[2]s/files/secret'\n", j.Name, dir)
		fmt.Fprintf(&probes, "probe %[1]s-plant 'echo x > %[2]s/files/planted'\n", j.Name, dir)
		fmt.Fprintf(&probes, "probe %[1]s-agent 'shelljob-agent signal --job %[2]s --signal KILL'\n", j.Name, j.UID)
	}
	fmt.Fprintf(&probes, "probe victim-kill 'kill -0 -- -%d'\n", victim.Status.PGID)
	fmt.Fprintf(&probes, "echo \"why $(shelljob-agent signal --job %s --signal KILL 2>&1)\"\n", victim.UID)
	fmt.Fprintf(&probes, "probe own-files 'echo mine > \"$SHELLJOB_OUT/mine\" && cat \"$SHELLJOB_OUT/mine\"'\n")
	fmt.Fprintf(&probes, "echo uid $(id -u)\n")

	for _, mode := range []shellv1alpha1.ShellJobMode{shellv1alpha1.ModeDirect, shellv1alpha1.ModeStateful} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == shellv1alpha1.ModeStateful {
				// The Stateful shell's worker is the pool's only one: it
				// runs once the victim is done, against two ended jobs.
				Stop(t, victim)
				WaitForJobEnd(t, victim, JobTimeout)
			}
			p := WaitForJobEnd(t, Create(t, Job(t, "probe", probes.String()).Pool(pool).Mode(mode))[0], JobTimeout)
			out := Output(t, p)
			if p.Status.Pod != victim.Status.Pod {
				t.Fatalf("the probe ran on %s, the victim on %s", p.Status.Pod, victim.Status.Pod)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				name, verdict, _ := strings.Cut(line, ": ")
				switch {
				case name == "own-files" && verdict != "allowed":
					t.Errorf("the job cannot use its own $SHELLJOB_OUT: %q", line)
				case strings.HasPrefix(line, "why "):
					if !strings.Contains(line, "permission denied") {
						t.Errorf("the agent's socket refused the job for another reason: %q", line)
					}
				case strings.HasPrefix(line, "uid "):
					uid, _ := strconv.Atoi(strings.TrimPrefix(line, "uid "))
					if uid == 0 {
						t.Errorf("the command runs as root")
					}
				case name != "own-files" && verdict != "denied":
					t.Errorf("%s: %s, want denied", name, verdict)
				}
			}
			t.Logf("probes:\n%s", out)
		})
	}
	if out := Output(t, victim); !strings.Contains(out, "victim-secret") {
		t.Errorf("the victim's output %q lost its line", out)
	}
	if v := Get(t, victim); v.Status.Phase != shellv1alpha1.PhaseStopped {
		t.Errorf("the victim ended %s, want Stopped (by the test, not by a probe)", v.Status.Phase)
	}
}

// TestOperatorMetrics: the operator's metrics endpoint answers only a
// token allowed to get /metrics, and shows the jobs, waits and workers.
func TestOperatorMetrics(t *testing.T) {
	WaitForJobEnd(t, Create(t, Job(t, "metered", "true"))[0], JobTimeout)
	reader, stranger := "e2e-metrics-reader", "e2e-metrics-stranger"
	binding := "e2e-shelljob-metrics-reader"
	for _, sa := range []string{reader, stranger} {
		run(t, "-n", Namespace, "create", "serviceaccount", sa)
		t.Cleanup(func() { _, _ = kubectlCmd("-n", Namespace, "delete", "serviceaccount", sa).CombinedOutput() })
	}
	run(t, "create", "clusterrolebinding", binding, "--clusterrole=shelljob-"+Namespace+"-metrics-reader", "--serviceaccount="+Namespace+":"+reader)
	t.Cleanup(func() { _, _ = kubectlCmd("delete", "clusterrolebinding", binding).CombinedOutput() })
	// The leader's: the other replica runs no controller, and counts no job.
	url, err := portForward("pod/"+operatorLeader(t), 8443)
	if err != nil {
		t.Fatal(err)
	}
	server := strings.Replace(url, "http://", "https://", 1)
	// kubectl get --raw, as a scraper would: no kubeconfig but the
	// endpoint and the token (the operator's certificate is self-signed).
	getRaw := func(token string) (string, error) {
		out, err := exec.Command(kubectl[0], "--kubeconfig", os.DevNull, "--server", server, "--insecure-skip-tls-verify",
			"--token", token, "get", "--raw", "/metrics").CombinedOutput()
		return string(out), err
	}
	token := func(sa string) string { return strings.TrimSpace(run(t, "-n", Namespace, "create", "token", sa)) }

	var out string
	poll(t, time.Minute, "the metrics, with the reader's token", func() (bool, string) {
		out, err = getRaw(token(reader))
		return err == nil, fmt.Sprintf("%v: %.300s", err, out)
	})
	for _, want := range []string{
		`shelljob_jobs_started_total{pool="` + Pool + `"}`,
		`shelljob_jobs_finished_total{phase="Succeeded",pool="` + Pool + `",reason="Exited"}`,
		`shelljob_job_queue_wait_seconds_count{pool="` + Pool + `"}`,
		`shelljob_job_start_latency_seconds_bucket{pool="` + Pool + `"`,
		`shelljob_pool_workers{pool="` + Pool + `",state="ready"} ` + strconv.Itoa(PoolSize),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
	if out, err := getRaw(token(stranger)); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("a token without the right to get /metrics: %v, %.200s", err, out)
	}
	// kubectl asks for a password when it has no credentials: a bare GET.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get(server + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %s, want 401 Unauthorized", resp.Status)
	}
}
