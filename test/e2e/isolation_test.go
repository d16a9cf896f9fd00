//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// inAgent runs a command in a worker's agent container, as root there:
// what the agent itself sees, all of the worker's processes included.
func inAgent(t *testing.T, pod string, command ...string) string {
	t.Helper()
	return run(t, append([]string{"-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--"}, command...)...)
}

// jobUID is the user a job ran as on its worker, from the agent's record.
func jobUID(t *testing.T, j *shellv1alpha1.ShellJob) int {
	t.Helper()
	var rec struct{ UID int }
	b := inAgent(t, j.Status.Pod, "cat", agentapi.SpoolDir+"/jobs/"+string(j.UID)+"/job.json")
	if err := json.Unmarshal([]byte(b), &rec); err != nil || rec.UID == 0 {
		t.Fatalf("the record of %s: %q, %v", j.Name, b, err)
	}
	return rec.UID
}

// processes lists "UID ARGS" of every process the agent's container sees.
func processes(t *testing.T, pod string) string {
	t.Helper()
	return inAgent(t, pod, "ps", "-eo", "uid=,args=")
}

// isolationPool makes a one-worker pool for a test, whose jobs all share
// that worker, and checks that the worker runs jobs in namespaces of their
// own, as the kind cluster's nodes allow.
func isolationPool(t *testing.T, name string) {
	t.Helper()
	sp := EnsurePool(t, EnsurePoolInput{Name: name, Replicas: 1})
	t.Cleanup(func() { _ = c.Delete(context.Background(), sp) })
	poll(t, PoolReadyTimeout, "pool "+name+" saying its jobs run in namespaces of their own", func() (bool, string) {
		p := &shellv1alpha1.ShellPool{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, p); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, shellv1alpha1.ShellPoolJobsIsolated)
		return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", cond)
	})
}

// TestNothingLeftBehind: a setsid daemon of a job is gone once its job
// ended, and so are the files it left in /tmp, /var/tmp and /dev/shm: as
// the agent sees its worker, and as a later job on the same worker does.
func TestNothingLeftBehind(t *testing.T) {
	const pool = "e2e-leave"
	isolationPool(t, pool)
	tag := "e2e-left-" + rand.String(6)
	leaver := WaitForJobEnd(t, Create(t, Job(t, "leaver", fmt.Sprintf(
		`setsid zsh -c 'while sleep 0.2; do :; done' %[1]s </dev/null >/dev/null 2>&1 &
for p in /tmp/%[1]s /var/tmp/%[1]s /dev/shm/%[1]s; do print left > $p; done
mkdir -p /tmp/%[1]s.d/deep && print left > /tmp/%[1]s.d/deep/f && chmod 000 /tmp/%[1]s.d/deep /tmp/%[1]s.d
print started`, tag)).Pool(pool))[0], JobTimeout)
	if out := Output(t, leaver); out != "started\n" {
		t.Fatalf("the leaver's output %q", out)
	}
	uid := jobUID(t, leaver)
	left := func(from, ps, files string) {
		t.Helper()
		for _, line := range strings.Split(strings.TrimSpace(ps), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && (f[0] == strconv.Itoa(uid) || strings.Contains(line, tag)) {
				t.Errorf("%s: a process of the ended job is left: %q", from, line)
			}
		}
		if strings.Contains(files, tag) {
			t.Errorf("%s: files of the ended job are left:\n%s", from, files)
		}
	}
	listing := []string{"ls", "-a", "/tmp", "/var/tmp", "/dev/shm"}
	left("the agent", processes(t, leaver.Status.Pod), inAgent(t, leaver.Status.Pod, listing...))

	later := WaitForJobEnd(t, Create(t, Job(t, "later", "ps -eo uid=,args=; print ---; "+strings.Join(listing, " ")).Pool(pool))[0], JobTimeout)
	if later.Status.Pod != leaver.Status.Pod {
		t.Fatalf("the later job ran on %s, the leaver on %s", later.Status.Pod, leaver.Status.Pod)
	}
	ps, files, _ := strings.Cut(Output(t, later), "---\n")
	left("a later job", ps, files)
	t.Logf("a later job sees:\n%s", ps)
}

// TestJobsSideBySideUnseen: a Direct job beside a running Fork job, a
// Direct job beside the Stateful shell, and the Stateful shell beside a
// Direct job see none of the other's processes or command lines, which
// the agent sees running all along.
func TestJobsSideBySideUnseen(t *testing.T) {
	const pool = "e2e-beside"
	isolationPool(t, pool)
	probe := "ps -eo pid=,args="
	for _, tc := range []struct{ victim, prober shellv1alpha1.ShellJobMode }{
		{shellv1alpha1.ModeFork, shellv1alpha1.ModeDirect},
		{shellv1alpha1.ModeStateful, shellv1alpha1.ModeDirect},
		{shellv1alpha1.ModeDirect, shellv1alpha1.ModeStateful},
	} {
		t.Run(string(tc.victim)+"-"+string(tc.prober), func(t *testing.T) {
			// A bearer token in a live process's command line, and in the
			// victim's command.
			token := "Bearer-" + rand.String(12)
			victim := WaitForJobPhase(t, Create(t, Job(t, "victim", fmt.Sprintf(`: %[1]s; zsh -c 'sleep 300; :' %[1]s`, token)).
				Pool(pool).Mode(tc.victim))[0], JobTimeout, shellv1alpha1.PhaseRunning)
			poll(t, JobTimeout, "the agent seeing the victim's token in a command line", func() (bool, string) {
				ps := processes(t, victim.Status.Pod)
				return strings.Contains(ps, token), ps
			})
			prober := WaitForJobEnd(t, Create(t, Job(t, "prober", probe).Pool(pool).Mode(tc.prober))[0], JobTimeout)
			if prober.Status.Pod != victim.Status.Pod {
				t.Fatalf("the prober ran on %s, the victim on %s", prober.Status.Pod, victim.Status.Pod)
			}
			out := Output(t, prober)
			if strings.Contains(out, token) || strings.Contains(out, "sleep 300") {
				t.Errorf("the %s prober sees the %s victim's processes:\n%s", tc.prober, tc.victim, out)
			}
			// Its own shell and ps, under its namespace's init.
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) > 4 {
				t.Errorf("the prober sees %d processes, not its own alone:\n%s", len(lines), out)
			}
			if !strings.Contains(processes(t, victim.Status.Pod), token) {
				t.Error("the victim's process ended before the probe; the test proves nothing")
			}
			t.Logf("the %s prober sees:\n%s", tc.prober, out)
			Stop(t, victim)
			WaitForJobEnd(t, victim, JobTimeout)
		})
	}
}

// TestSpoolBudget: a worker's spool stays within its budget (15/16 of its
// 1Gi sizeLimit) through 100 jobs of 32 MiB of output each, marked
// delivered as the bot marks them, and the worker is never evicted; the
// spool of the one job left undelivered is there, whole, at the end, and
// the oldest delivered ones are gone.
func TestSpoolBudget(t *testing.T) {
	const (
		pool   = "e2e-spool"
		jobs   = 100
		output = 32 << 20
		budget = (1 << 30) - (1<<30)/16
	)
	sp := EnsurePool(t, EnsurePoolInput{Name: pool, Replicas: 1})
	t.Cleanup(func() { _ = c.Delete(context.Background(), sp) })
	worker := workerPods(t, pool, sp.Status.Revision)
	if len(worker) != 1 {
		t.Fatalf("workers %v", worker)
	}
	pod, podUID := worker[0].Name, worker[0].UID
	command := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x`, output)
	var ended []*shellv1alpha1.ShellJob
	start := time.Now()
	for i := range jobs {
		j := WaitForJobEnd(t, Create(t, Job(t, fmt.Sprintf("out%03d", i), command).Pool(pool))[0], 2*JobTimeout)
		if j.Status.Phase != shellv1alpha1.PhaseSucceeded || j.Status.OutputBytes != output || j.Status.Pod != pod {
			t.Fatalf("job %d: %s on %s, %d bytes, %s", i, j.Status.Phase, j.Status.Pod, j.Status.OutputBytes, FinishedReason(j))
		}
		if i > 0 { // the first stays undelivered
			Deliver(t, j)
		}
		ended = append(ended, j)
		used, err := strconv.ParseInt(strings.Fields(inAgent(t, pod, "du", "-sk", agentapi.SpoolDir))[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if used*1024 > budget {
			t.Fatalf("after job %d the spool takes %d KiB, past its budget of %d KiB", i, used, budget/1024)
		}
		if i%10 == 9 {
			t.Logf("%d jobs in %v: the spool takes %d MiB", i+1, time.Since(start).Round(time.Second), used/1024)
		}
	}
	now := workerPods(t, pool, sp.Status.Revision)
	if len(now) != 1 || now[0].UID != podUID || now[0].Status.Phase != "Running" {
		t.Fatalf("the worker was replaced or ended: %+v", now)
	}
	if got := inAgent(t, pod, "sh", "-c", fmt.Sprintf("%s %s %s=%s | wc -c", agentapi.AgentPath, agentapi.CmdFollow, agentapi.FlagJob, ended[0].UID)); strings.TrimSpace(got) != strconv.Itoa(output) {
		t.Errorf("the undelivered spool holds %s bytes, want %d", strings.TrimSpace(got), output)
	}
	for _, j := range ended[1:4] {
		if _, err := kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--",
			agentapi.AgentPath, agentapi.CmdFollow, agentapi.FlagJob+"="+string(j.UID)).CombinedOutput(); err == nil {
			t.Errorf("the delivered spool of %s, among the oldest, is still there", j.Name)
		}
	}
	for _, j := range ended[jobs-3:] {
		if out := Output(t, j); len(out) != output {
			t.Errorf("the newest delivered spool of %s holds %d bytes, want %d", j.Name, len(out), output)
		}
	}
}
