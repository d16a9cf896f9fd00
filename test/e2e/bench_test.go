//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
	joblife "shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamclient"
)

// TestBenchCluster measures the operator on kind, each figure beside plain
// kubectl exec in the same run. It prints "BENCH name value unit" lines for
// hack/bench.sh (section cluster) and asserts nothing about speed; it runs
// only with E2E_BENCH=1.
//
//   - start: ShellJob created → first output byte read back through the
//     stream API (the log subresource, as the bot and kubectl shelljob
//     read), p50 and p95 over E2E_BENCH_JOBS jobs (default 50); beside it,
//     the same through the operator's warm channel to the agent, and
//     through an exec of the agent per follow; baseline: `kubectl exec POD
//     -- zsh -c 'echo x'` → first byte.
//   - throughput: `head -c 256M /dev/zero` read back through the stream
//     API while it runs (see throughputJob); baseline: the same command's
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
	// warm follows as the bot does, over a channel to each worker it
	// follows on; agent follows with an exec each, as kubectl shelljob.
	warm, agent, stream := newAgent(t, true), newAgent(t, false), newStream(t)

	var start, startWarm, startCold startSteps
	var startBase, roundTrip []time.Duration
	for i := range jobs {
		start.add(jobToFirstByte(t, streamFollower(stream), fmt.Sprintf("start%02d", i)))
		startWarm.add(jobToFirstByte(t, agentFollower(warm), fmt.Sprintf("warm%02d", i)))
		startCold.add(jobToFirstByte(t, agentFollower(agent), fmt.Sprintf("cold%02d", i)))
		startBase = append(startBase, execToFirstByte(t, pod, "zsh", "-c", "echo x"))
		roundTrip = append(roundTrip, execRoundTrip(t, agent, pod))
	}
	report("start_p50", pct(start.firstByte, 50), "ms")
	report("start_p95", pct(start.firstByte, 95), "ms")
	report("start_warm_p50", pct(startWarm.firstByte, 50), "ms")
	report("start_warm_p95", pct(startWarm.firstByte, 95), "ms")
	report("start_cold_p50", pct(startCold.firstByte, 50), "ms")
	report("start_cold_p95", pct(startCold.firstByte, 95), "ms")
	report("start_base_p50", pct(startBase, 50), "ms")
	report("start_base_p95", pct(startBase, 95), "ms")
	report("start_step_create_p50", pct(start.created, 50), "ms")
	report("start_step_placed_p50", pct(start.placed, 50), "ms")
	report("start_step_running_p50", pct(start.running, 50), "ms")
	report("exec_roundtrip_p50", pct(roundTrip, 50), "ms")

	const size = 256 << 20
	throughputJob(t, stream, size)
	report("throughput_base", throughputExec(t, pod, size), "MiB/s")

	var stop stopSteps
	var stopBase []time.Duration
	for i := range 10 {
		stop.add(stopJob(t, fmt.Sprintf("stop%02d", i)))
		stopBase = append(stopBase, stopExec(t, pod))
	}
	report("stop_p50", pct(stop.stopped, 50), "ms")
	report("stop_base_p50", pct(stopBase, 50), "ms")
	report("stop_step_patch_p50", pct(stop.patched, 50), "ms")
	report("stop_step_signal_p50", pct(stop.signaled, 50), "ms")
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

// newAgent is an agent client of the suite's cluster; share keeps a warm
// channel to each worker it follows on (agentclient.Options.ShareFollows).
func newAgent(t *testing.T, share bool) *agentclient.Client {
	t.Helper()
	a, err := agentclient.New(restConfig, agentclient.Options{Container: agentapi.WorkerContainer, ShareFollows: share})
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

// watchJob calls seen with each state of the job from its version rv on,
// as the watch delivers it, until seen returns true.
func watchJob(t *testing.T, j *shellv1alpha1.ShellJob, seen func(*shellv1alpha1.ShellJob) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	w, err := watcher.Watch(ctx, &shellv1alpha1.ShellJobList{}, client.InNamespace(j.Namespace),
		client.MatchingFields{"metadata.name": j.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: j.ResourceVersion}})
	if err != nil {
		t.Fatalf("watch %s: %v", j.Name, err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if got, ok := ev.Object.(*shellv1alpha1.ShellJob); ok && seen(got) {
			return
		}
	}
	t.Fatalf("watch of %s ended: %v", j.Name, ctx.Err())
}

// startSteps are the times from the create call of each job.
type startSteps struct {
	// created: the create call returned. placed: the watch showed the
	// job's worker. running: it showed the command started. firstByte:
	// the follower read the first byte.
	created, placed, running, firstByte []time.Duration
}

func (s *startSteps) add(step startStep) {
	s.created = append(s.created, step.created)
	s.placed = append(s.placed, step.placed)
	s.running = append(s.running, step.running)
	s.firstByte = append(s.firstByte, step.firstByte)
}

type startStep struct{ created, placed, running, firstByte time.Duration }

// A follower follows a job's output from its start, with AwaitStart. It
// is opened on the state of the job the create returned (atCreate), or the
// first the watch shows with its worker.
type follower struct {
	atCreate bool
	follow   func(ctx context.Context, j *shellv1alpha1.ShellJob, w io.Writer) error
}

// streamFollower reads through the stream API, right after the create, as
// the bot and kubectl shelljob do.
func streamFollower(s *streamclient.Client) follower {
	return follower{atCreate: true, follow: func(ctx context.Context, j *shellv1alpha1.ShellJob, w io.Writer) error {
		_, err := s.Follow(ctx, j.Name, agentapi.AwaitStart, w)
		return err
	}}
}

// agentFollower reads from the job's agent, once the job has its worker.
func agentFollower(agent *agentclient.Client) follower {
	return follower{follow: func(ctx context.Context, j *shellv1alpha1.ShellJob, w io.Writer) error {
		pod := types.NamespacedName{Namespace: WorkerNamespace, Name: j.Status.Pod}
		_, err := agent.Follow(ctx, pod, string(j.UID), agentapi.AwaitStart, w)
		return err
	}}
}

// newStream is a stream API client of the suite's cluster and namespace.
func newStream(t *testing.T) *streamclient.Client {
	t.Helper()
	s, err := streamclient.New(restConfig, streamclient.Options{Namespace: Namespace})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobToFirstByte times a job from its create call to the first byte its
// follower reads.
func jobToFirstByte(t *testing.T, f follower, name string) startStep {
	t.Helper()
	var step startStep
	t0 := time.Now()
	j := Create(t, Job(t, name, "echo x"))[0]
	step.created = time.Since(t0)
	var w firstByte
	followed := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	open := func(j *shellv1alpha1.ShellJob) {
		go func() { followed <- f.follow(ctx, j, &w) }()
	}
	if f.atCreate {
		open(j)
	}
	watchJob(t, j, func(got *shellv1alpha1.ShellJob) bool {
		if got.Status.Pod != "" && step.placed == 0 {
			step.placed = time.Since(t0)
			if !f.atCreate {
				open(got)
			}
		}
		if got.Status.Ran && step.running == 0 {
			step.running = time.Since(t0)
		}
		return step.running != 0
	})
	if err := <-followed; err != nil {
		t.Fatalf("follow %s: %v", j.Name, err)
	}
	WaitForJobEnd(t, j, JobTimeout)
	_ = c.Delete(context.Background(), j)
	step.firstByte = w.first.Sub(t0)
	return step
}

// execRoundTrip times one exec of the agent that answers at once (a
// signal to no job), as each start and stop step costs without the warm
// channel.
func execRoundTrip(t *testing.T, agent *agentclient.Client, pod string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := agent.Signal(ctx, types.NamespacedName{Namespace: WorkerNamespace, Name: pod}, "00000000-0000-0000-0000-000000000000", agentapi.SIGINT)
	if !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Fatalf("signal to no job: %v", err)
	}
	return time.Since(t0)
}

// waitStarted waits until the job's command ran.
func waitStarted(t *testing.T, j *shellv1alpha1.ShellJob) *shellv1alpha1.ShellJob {
	t.Helper()
	var started *shellv1alpha1.ShellJob
	watchJob(t, j, func(got *shellv1alpha1.ShellJob) bool {
		started = got
		return got.Status.Ran
	})
	return started
}

// execToFirstByte runs kubectl exec and times its first byte of stdout.
func execToFirstByte(t *testing.T, pod string, command ...string) time.Duration {
	t.Helper()
	var w firstByte
	cmd := kubectlCmd(append([]string{"-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--"}, command...)...)
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
func throughputJob(t *testing.T, stream *streamclient.Client, size int64) {
	t.Helper()
	j := Create(t, Job(t, "throughput", fmt.Sprintf("head -c %d /dev/zero", size)))[0]
	j = waitStarted(t, j)
	var w firstByte
	ctx, cancel := context.WithTimeout(context.Background(), 5*JobTimeout)
	defer cancel()
	reached, err := stream.Follow(ctx, j.Name, 0, &w)
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
	cmd := kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--",
		"head", "-c", strconv.FormatInt(size, 10), "/dev/zero")
	cmd.Stdout = &w
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl exec: %v", err)
	}
	return float64(w.n) / (1 << 20) / time.Since(w.first).Seconds()
}

// stopSteps are the times from the stop patch of each job.
type stopSteps struct {
	// patched: the patch call returned. signaled: the watch showed the
	// first signal sent. stopped: it showed the job Stopped.
	patched, signaled, stopped []time.Duration
}

func (s *stopSteps) add(step stopStep) {
	s.patched = append(s.patched, step.patched)
	s.signaled = append(s.signaled, step.signaled)
	s.stopped = append(s.stopped, step.stopped)
}

type stopStep struct{ patched, signaled, stopped time.Duration }

// stopJob times a stop: spec.stop set → the job's end recorded, as the
// watch delivers it.
func stopJob(t *testing.T, name string) stopStep {
	t.Helper()
	var step stopStep
	j := Create(t, Job(t, name, "sleep 100"))[0]
	j = waitStarted(t, j)
	patch := client.MergeFrom(j.DeepCopy())
	j.Spec.Stop = true
	t0 := time.Now()
	if err := c.Patch(context.Background(), j, patch); err != nil {
		t.Fatalf("stop %s: %v", name, err)
	}
	step.patched = time.Since(t0)
	watchJob(t, j, func(got *shellv1alpha1.ShellJob) bool {
		if len(got.Status.StopSteps) > 0 && step.signaled == 0 {
			step.signaled = time.Since(t0)
		}
		if got.Status.Phase == shellv1alpha1.PhaseStopped {
			step.stopped = time.Since(t0)
			return true
		}
		return false
	})
	_ = c.Delete(context.Background(), j)
	return step
}

// stopExec times the same over plain kubectl exec: SIGINT to a sleep that
// another kubectl exec runs, until that exec returns.
func stopExec(t *testing.T, pod string) time.Duration {
	t.Helper()
	tag := strconv.FormatInt(time.Now().UnixNano()%100000+100000, 10)
	inPod := func(args ...string) *exec.Cmd {
		return kubectlCmd(append([]string{"-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--"}, args...)...)
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

// TestBenchBurst measures a burst: E2E_BENCH_BURST (300) short jobs
// created at once through the chart's 16-worker pool (shell, the chat's),
// to the last one finished,
// beside as many plain kubectl exec calls of the same command run 16 at a
// time on the same workers. It counts the jobs lost (not Succeeded with
// their own output) and the API writes per job. It runs only with
// E2E_BENCH=1 (hack/bench.sh cluster).
func TestBenchBurst(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh cluster runs this")
	}
	const workers = 16
	jobs := 300
	if n, err := strconv.Atoi(os.Getenv("E2E_BENCH_BURST")); err == nil && n > 0 {
		jobs = n
	}
	pool := WaitForPoolAvailable(t, "shell")
	pods := workerPods(t, pool.Name, pool.Status.Revision)
	if len(pods) != workers {
		t.Fatalf("%d workers, want %d", len(pods), workers)
	}

	// All at once: client-go's default limit (5 requests a second) would
	// make the creates the bottleneck.
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS = -1
	creator, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	writes0 := apiWritesBy(t)
	t0 := time.Now()
	created := make([]*shellv1alpha1.ShellJob, jobs)
	parallel(jobs, 32, func(i int) {
		j := Job(t, fmt.Sprintf("burst%03d", i), fmt.Sprintf("echo burst %d", i)).Pool(pool.Name).Obj()
		if err := creator.Create(context.Background(), j); err != nil {
			t.Errorf("create %s: %v", j.Name, err)
			return
		}
		created[i] = j
		t.Cleanup(func() { _ = c.Delete(context.Background(), j) })
	})
	if t.Failed() {
		t.FailNow()
	}
	ended := waitAllEnded(t, created)
	took := time.Since(t0)
	writes := apiWritesBy(t)

	agent := newAgent(t, true)
	var mu sync.Mutex
	lost := 0
	parallel(jobs, 8, func(i int) {
		j := ended[created[i].Name]
		out, err := followAll(agent, j)
		if j.Status.Phase != shellv1alpha1.PhaseSucceeded || err != nil || out != fmt.Sprintf("burst %d\n", i) {
			mu.Lock()
			lost++
			mu.Unlock()
			t.Errorf("%s: %s, output %q, %v", j.Name, j.Status.Phase, out, err)
		}
	})

	b0 := time.Now()
	parallel(jobs, workers, func(i int) {
		pod := pods[i%workers].Name
		cmd := kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--", "zsh", "-c", fmt.Sprintf("echo burst %d", i))
		if out, err := cmd.Output(); err != nil || string(out) != fmt.Sprintf("burst %d\n", i) {
			t.Errorf("kubectl exec %d: %q, %v", i, out, err)
		}
	})
	base := time.Since(b0)

	report("burst_jobs", float64(jobs), "jobs")
	report("burst_s", took.Seconds(), "s")
	report("burst_base_s", base.Seconds(), "s")
	report("burst_lost", float64(lost), "jobs")
	var total float64
	for k, v := range writes {
		d := v - writes0[k]
		total += d
		if d > 0 {
			report("burst_writes_per_job_"+k, d/float64(jobs), "writes")
		}
	}
	report("burst_writes_per_job", total/float64(jobs), "writes")
}

// parallel runs do(0..n-1), at most width at a time.
func parallel(n, width int, do func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(i)
		})
	}
	wg.Wait()
}

// waitAllEnded watches the jobs until each has ended, and returns their
// last states by name.
func waitAllEnded(t *testing.T, jobs []*shellv1alpha1.ShellJob) map[string]*shellv1alpha1.ShellJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*JobTimeout)
	defer cancel()
	want := map[string]bool{}
	for _, j := range jobs {
		want[j.Name] = true
	}
	ended := map[string]*shellv1alpha1.ShellJob{}
	var list shellv1alpha1.ShellJobList
	sel := client.MatchingLabels{labelTest: testLabel(t)}
	if err := c.List(ctx, &list, client.InNamespace(Namespace), sel); err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &shellv1alpha1.ShellJobList{}, client.InNamespace(Namespace), sel,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	note := func(j *shellv1alpha1.ShellJob) {
		if want[j.Name] && joblife.IsFinished(j) {
			ended[j.Name] = j
		}
	}
	for i := range list.Items {
		note(&list.Items[i])
	}
	for len(ended) < len(want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended with %d of %d jobs ended", len(ended), len(want))
			}
			if j, ok := ev.Object.(*shellv1alpha1.ShellJob); ok {
				note(j)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d jobs ended", len(ended), len(want))
		}
	}
	return ended
}

// followAll reads an ended job's whole output through its agent.
func followAll(agent *agentclient.Client, j *shellv1alpha1.ShellJob) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), JobTimeout)
	defer cancel()
	var out strings.Builder
	_, err := agent.Follow(ctx, types.NamespacedName{Namespace: WorkerNamespace, Name: j.Status.Pod}, string(j.UID), 0, &out)
	return out.String(), err
}

// apiWritesBy counts the API server's create, update and patch requests so
// far, by resource (and subresource): the ShellJobs, pools, pods,
// ConfigMaps and Events.
func apiWritesBy(t *testing.T) map[string]float64 {
	t.Helper()
	verb := regexp.MustCompile(`verb="(POST|PUT|PATCH|APPLY)"`)
	resource := regexp.MustCompile(`resource="(shelljobs|shellpools|pods|configmaps|events)"`)
	sub := regexp.MustCompile(`subresource="([a-z]*)"`)
	by := map[string]float64{}
	for _, m := range writeCounter.FindAllStringSubmatch(run(t, "get", "--raw", "/metrics"), -1) {
		labels := m[1]
		r := resource.FindStringSubmatch(labels)
		if !verb.MatchString(labels) || r == nil {
			continue
		}
		key := r[1]
		if s := sub.FindStringSubmatch(labels); s != nil && s[1] != "" {
			key += "_" + s[1]
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		by[key] += v
	}
	return by
}
