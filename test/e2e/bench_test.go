//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/agentclient"
)

// TestBenchCluster measures the operator on kind, each figure beside plain
// kubectl exec in the same run. It prints "BENCH name value unit" lines for
// hack/bench.sh (section cluster) and asserts nothing about speed; it runs
// only with E2E_BENCH=1.
//
//   - start: ShellJob created → first output byte read back through the
//     agent (Follow), p50 and p95 over E2E_BENCH_JOBS jobs (default 50);
//     baseline: `kubectl exec POD -- zsh -c 'echo x'` → first byte.
//   - throughput: `head -c 256M /dev/zero` read back through the agent
//     while it runs (see throughputJob); baseline: the same command's
//     stdout over kubectl exec.
//   - stop: spec.stop set → the job's end recorded (its group is empty);
//     baseline: kubectl exec of `pkill -INT sleep` → the kubectl exec that
//     ran the sleep returns.
func TestBenchCluster(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh cluster runs this")
	}
	jobs := 50
	if n, err := strconv.Atoi(os.Getenv("E2E_BENCH_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	pool := EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	pod := workerPods(t, Pool, pool.Status.Revision)[0].Name
	agent := newAgent(t)

	var start, startBase []time.Duration
	for i := range jobs {
		start = append(start, jobToFirstByte(t, agent, fmt.Sprintf("start%02d", i)))
		startBase = append(startBase, execToFirstByte(t, pod, "zsh", "-c", "echo x"))
	}
	report("start_p50", pct(start, 50), "ms")
	report("start_p95", pct(start, 95), "ms")
	report("start_base_p50", pct(startBase, 50), "ms")
	report("start_base_p95", pct(startBase, 95), "ms")

	const size = 256 << 20
	throughputJob(t, agent, size)
	report("throughput_base", throughputExec(t, pod, size), "MiB/s")

	var stop, stopBase []time.Duration
	for i := range 10 {
		stop = append(stop, stopJob(t, fmt.Sprintf("stop%02d", i)))
		stopBase = append(stopBase, stopExec(t, pod))
	}
	report("stop_p50", pct(stop, 50), "ms")
	report("stop_base_p50", pct(stopBase, 50), "ms")
}

func report(name string, value float64, unit string) {
	fmt.Printf("BENCH %s %.1f %s\n", name, value, unit)
}

// pct is the p-th percentile of ds, in milliseconds (nearest rank).
func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max(0, (len(s)*p+99)/100-1)
	return float64(s[i]) / float64(time.Millisecond)
}

func newAgent(t *testing.T) *agentclient.Client {
	t.Helper()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{CurrentContext: os.Getenv("E2E_CONTEXT")}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := agentclient.New(cfg, agentclient.Options{Container: controllers.WorkerContainer})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// firstByte records when the first byte came, and counts them all.
type firstByte struct {
	mu    sync.Mutex
	first time.Time
	n     int64
}

func (f *firstByte) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first.IsZero() && len(p) > 0 {
		f.first = time.Now()
	}
	f.n += int64(len(p))
	return len(p), nil
}

// waitStarted polls the job, at a fine pace, until its command ran.
func waitStarted(t *testing.T, j *shellv1alpha1.ShellJob) *shellv1alpha1.ShellJob {
	t.Helper()
	deadline := time.Now().Add(JobTimeout)
	for {
		got := Get(t, j)
		if got.Status.Ran {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %+v", j.Name, got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jobToFirstByte(t *testing.T, agent *agentclient.Client, name string) time.Duration {
	t.Helper()
	t0 := time.Now()
	j := Create(t, Job(t, name, "echo x"))[0]
	j = waitStarted(t, j)
	var w firstByte
	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	if _, err := agent.Follow(ctx, types.NamespacedName{Namespace: WorkerNamespace, Name: j.Status.Pod}, string(j.UID), 0, &w); err != nil {
		t.Fatalf("follow %s: %v", j.Name, err)
	}
	WaitForJobEnd(t, j, JobTimeout)
	_ = c.Delete(context.Background(), j)
	return w.first.Sub(t0)
}

// execToFirstByte runs kubectl exec and times its first byte of stdout.
func execToFirstByte(t *testing.T, pod string, command ...string) time.Duration {
	t.Helper()
	var w firstByte
	cmd := kubectlCmd(append([]string{"-n", WorkerNamespace, "exec", pod, "-c", controllers.WorkerContainer, "--"}, command...)...)
	cmd.Stdout = &w
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl exec: %v", err)
	}
	return w.first.Sub(t0)
}

// throughputJob follows a job that writes size bytes as fast as it can,
// from its start. The spool keeps the first and the last 16 MiB, and a
// reader that falls behind by more than the tail gets a gap line instead
// of the bytes it missed, so it reports two figures: the rate at which
// the output went through (the offset reached over the time), and the
// rate of the bytes the reader got.
func throughputJob(t *testing.T, agent *agentclient.Client, size int64) {
	t.Helper()
	j := Create(t, Job(t, "throughput", fmt.Sprintf("head -c %d /dev/zero", size)))[0]
	j = waitStarted(t, j)
	var w firstByte
	ctx, cancel := context.WithTimeout(context.Background(), 5*JobTimeout)
	defer cancel()
	reached, err := agent.Follow(ctx, types.NamespacedName{Namespace: WorkerNamespace, Name: j.Status.Pod}, string(j.UID), 0, &w)
	took := time.Since(w.first).Seconds()
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	t.Logf("throughput: offset %d of %d, %d bytes delivered in %.2f s", reached, size, w.n, took)
	report("throughput", float64(reached)/(1<<20)/took, "MiB/s")
	report("throughput_delivered", float64(w.n)/(1<<20)/took, "MiB/s")
	report("delivered", float64(w.n)/(1<<20), "MiB")
}

func throughputExec(t *testing.T, pod string, size int64) float64 {
	t.Helper()
	var w firstByte
	cmd := kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", controllers.WorkerContainer, "--",
		"head", "-c", strconv.FormatInt(size, 10), "/dev/zero")
	cmd.Stdout = &w
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl exec: %v", err)
	}
	return float64(w.n) / (1 << 20) / time.Since(w.first).Seconds()
}

// stopJob times a stop: spec.stop set → the job's end recorded.
func stopJob(t *testing.T, name string) time.Duration {
	t.Helper()
	j := Create(t, Job(t, name, "sleep 100"))[0]
	waitStarted(t, j)
	t0 := Stop(t, j)
	deadline := time.Now().Add(JobTimeout)
	for {
		got := Get(t, j)
		if got.Status.Phase == shellv1alpha1.PhaseStopped {
			_ = c.Delete(context.Background(), j)
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not stop: %+v", name, got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopExec times the same over plain kubectl exec: SIGINT to a sleep that
// another kubectl exec runs, until that exec returns.
func stopExec(t *testing.T, pod string) time.Duration {
	t.Helper()
	tag := strconv.FormatInt(time.Now().UnixNano()%100000+100000, 10)
	inPod := func(args ...string) *exec.Cmd {
		return kubectlCmd(append([]string{"-n", WorkerNamespace, "exec", pod, "-c", controllers.WorkerContainer, "--"}, args...)...)
	}
	sleeper := inPod("sleep", tag)
	sleeper.Stdout, sleeper.Stderr = io.Discard, io.Discard
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(done) }()
	// Wait until the sleep runs in the pod.
	for range 100 {
		if inPod("pgrep", "-f", "sleep "+tag).Run() == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t0 := time.Now()
	if err := inPod("pkill", "-INT", "-f", "sleep "+tag).Run(); err != nil {
		t.Fatalf("pkill: %v", err)
	}
	select {
	case <-done:
	case <-time.After(JobTimeout):
		t.Fatal("the plain exec's sleep did not end")
	}
	return time.Since(t0)
}
