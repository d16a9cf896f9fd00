//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	jobstate "shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

const (
	// memBar is the bar: the operator, and the bot, stay under
	// this above their memory at rest.
	memBar = 64 << 20
	// memSettle is how long the memory is left to settle before a reading
	// of it "with" the jobs.
	memSettle = 30 * time.Second
	// commandSize is the API's largest command.
	commandSize = 64 << 10
	// benchPool is the chart's 16-worker pool, the chat's and the burst's.
	benchPool = "shell"
)

// TestBenchOperatorMemory measures the operator's memory (its container's
// cgroup on its kind node, memory.current) beside its memory at rest in
// the same run, with ShellJobs of 64 KiB commands in the namespace, and
// fails when a figure is 64 MiB or more above the rest or the operator
// restarted:
//
//   - queued: E2E_BENCH_QUEUED (1,000) jobs queued behind 16 `sleep`
//     jobs that hold every worker of the shell pool: the peak while they
//     are created and queued, and the memory once they are; then the peak
//     while they are placed and run, once the sleeps are stopped, and how
//     fast: their jobs a second beside a burst of as many of the same
//     jobs created at once on the free workers, measured first. Each job's
//     command prints its own length, which its output is checked for.
//   - finished: E2E_BENCH_FINISHED (10,000) jobs created stopped, so that
//     they finish without running: the peak while they are created and
//     ended, and the memory once they are; then the operator restarted
//     with them in place: its new container's peak (the cgroup's high-water
//     mark) and its memory once it settled. The bot, whose cache keeps
//     a CLI job as its name and origin, is measured through the same, and
//     the API server's memory and etcd's size are reported beside them.
//
// The chart's quota (jobQuota, 10,000) is raised for the run by what the
// namespace already holds, and put back. It runs only with E2E_BENCH=1
// (hack/bench.sh memory).
func TestBenchOperatorMemory(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh memory runs this")
	}
	queued := envCount(t, "E2E_BENCH_QUEUED", 1000)
	finished := envCount(t, "E2E_BENCH_FINISHED", 10000)
	pool := WaitForPoolAvailable(t, benchPool)
	workers := int(pool.Spec.Replicas)
	roomInQuota(t, int64(finished+workers+1))

	op := operatorCgroup(t)
	restarts0 := operatorRestarts(t)
	apiServer := containerCgroup(t, "kube-system", "component=kube-apiserver", "kube-apiserver")
	etcdQuota, etcdQuotaSet, etcdSize := etcdFigures(t)
	rest, apiRest := op.usage(t), apiServer.usage(t)
	t.Logf("at rest: operator %.1f MiB, API server %.1f MiB, etcd %.1f MiB (quota %d, set %v), %d ShellJobs in %s",
		mib(rest), mib(apiRest), mib(etcdSize), etcdQuota, etcdQuotaSet, jobsIn(t, ""), Namespace)

	// The baseline: as many of the same jobs, created at once on free
	// workers. Their commands are the queued ones' (64 KiB, read and run
	// by the shell), so that the two paces differ by the queue alone.
	label := testLabel(t)
	t0 := time.Now()
	createJobs(t, queued, func(i int) *utiltesting.ShellJobWrapper {
		return Job(t, fmt.Sprintf("burst%05d", i), selfMeasuringCommand(i)).Pool(benchPool)
	})
	waitPhases(t, label, queued, time.Second, shellv1alpha1.PhaseSucceeded)
	burstPace := float64(queued) / time.Since(t0).Seconds()
	deleteJobs(t)

	// Queued behind busy workers.
	var blockers []*shellv1alpha1.ShellJob
	for i := range workers {
		blockers = append(blockers, Create(t, Job(t, fmt.Sprintf("block%02d", i), "sleep 3600").Pool(benchPool))[0])
	}
	waitPhases(t, label, workers, time.Second, shellv1alpha1.PhaseRunning)
	peak := op.watchPeak(t)
	createJobs(t, queued, func(i int) *utiltesting.ShellJobWrapper {
		return Job(t, fmt.Sprintf("queued%05d", i), selfMeasuringCommand(i)).Pool(benchPool)
	})
	waitQueued(t, label, queued)
	time.Sleep(memSettle)
	queuedMem, queuedPeak := op.usage(t), peak()

	peak = op.watchPeak(t)
	t0 = time.Now()
	for _, b := range blockers {
		Stop(t, b)
	}
	waitPhases(t, label, queued, time.Second, shellv1alpha1.PhaseSucceeded)
	queuedPace := float64(queued) / time.Since(t0).Seconds()
	placePeak := peak()
	lost := checkSelfMeasured(t, label, queued)
	deleteJobs(t)

	// Finished.
	bot := botCgroup(t)
	botRest := bot.usage(t)
	peak, botPeak, apiPeak := op.watchPeak(t), bot.watchPeak(t), apiServer.watchPeak(t)
	t0 = time.Now()
	createJobs(t, finished, func(i int) *utiltesting.ShellJobWrapper {
		return Job(t, fmt.Sprintf("fin%05d", i), padded(": ", "")).Pool(benchPool).Stop(shellv1alpha1.StopReasonUser)
	})
	created := time.Since(t0)
	waitPhases(t, label, finished, 2*time.Second, shellv1alpha1.PhaseStopped)
	ended := time.Since(t0)
	time.Sleep(memSettle)
	finishedMem, finishedPeak := op.usage(t), peak()
	botFinished, botFinishedPeak := bot.usage(t), botPeak()
	apiFinished, apiFinishedPeak := apiServer.usage(t), apiPeak()
	_, _, etcdFinished := etcdFigures(t)
	restarts := operatorRestarts(t) - restarts0
	oldOp, oldBot := op.container, bot.container

	// The operator and the bot start again with the finished jobs there:
	// each lists them all, and how long until the operator leads and ends
	// a job is a figure of its own.
	t0 = time.Now()
	run(t, "-n", Namespace, "delete", "pod", "-l", "app.kubernetes.io/component=operator", "--wait=false")
	run(t, "-n", Namespace, "delete", "pod", "-l", "app.kubernetes.io/component=bot", "--wait=false")
	waitLeaderReplaced(t, oldOp, restartWithJobsTimeout)
	waitReplaced(t, "app.kubernetes.io/component=bot", "bot", oldBot)
	probe := Create(t, Job(t, "probe", "true").Pool(benchPool).Stop(shellv1alpha1.StopReasonUser))[0]
	WaitForJobPhase(t, probe, restartWithJobsTimeout, shellv1alpha1.PhaseStopped)
	restartedIn := time.Since(t0)
	time.Sleep(memSettle)
	op, bot = operatorCgroup(t), botCgroup(t)
	restartMem, restartPeak := op.usage(t), op.peakSinceStart(t)
	botRestart, botRestartPeak := bot.usage(t), bot.peakSinceStart(t)
	restarts += operatorRestarts(t)

	deleteJobs(t)
	_, _, etcdAfter := etcdFigures(t)

	report("opmem_rest", mib(rest), "MiB")
	report("opmem_queued_jobs", float64(queued), "jobs")
	report("opmem_queued_peak", mib(queuedPeak), "MiB")
	report("opmem_queued", mib(queuedMem), "MiB")
	report("opmem_place_peak", mib(placePeak), "MiB")
	report("opmem_queued_pace", queuedPace, "jobs/s")
	report("opmem_burst_pace", burstPace, "jobs/s")
	report("opmem_queued_lost", float64(lost), "jobs")
	report("opmem_finished_jobs", float64(finished), "jobs")
	report("opmem_finished_create_s", created.Seconds(), "s")
	report("opmem_finished_end_s", ended.Seconds(), "s")
	report("opmem_finished_peak", mib(finishedPeak), "MiB")
	report("opmem_finished", mib(finishedMem), "MiB")
	report("opmem_restart_peak", mib(restartPeak), "MiB")
	report("opmem_restart", mib(restartMem), "MiB")
	report("opmem_restarts", float64(restarts), "restarts")
	report("opmem_restart_ready_s", restartedIn.Seconds(), "s")
	report("botmem_rest", mib(botRest), "MiB")
	report("botmem_finished_peak", mib(botFinishedPeak), "MiB")
	report("botmem_finished", mib(botFinished), "MiB")
	report("botmem_restart_peak", mib(botRestartPeak), "MiB")
	report("botmem_restart", mib(botRestart), "MiB")
	report("apimem_rest", mib(apiRest), "MiB")
	report("apimem_finished_peak", mib(apiFinishedPeak), "MiB")
	report("apimem_finished", mib(apiFinished), "MiB")
	report("etcd_rest", mib(etcdSize), "MiB")
	report("etcd_finished", mib(etcdFinished), "MiB")
	report("etcd_after", mib(etcdAfter), "MiB")
	report("etcd_quota", mib(etcdQuota), "MiB")
	report("etcd_quota_set", map[bool]float64{true: 1}[etcdQuotaSet], "flag")

	for name, v := range map[string]int64{
		"peak while the queued jobs were created": queuedPeak, "with the jobs queued": queuedMem,
		"peak while they were placed": placePeak, "peak while the finished jobs were created": finishedPeak,
		"with the jobs finished": finishedMem, "peak of its restart with them": restartPeak, "after that restart": restartMem,
	} {
		if v-rest >= memBar {
			t.Errorf("operator, %s: %.1f MiB, %.1f MiB above its %.1f MiB at rest; the bar is under %d MiB",
				name, mib(v), mib(v-rest), mib(rest), memBar>>20)
		}
	}
	for name, v := range map[string]int64{
		"peak while the finished jobs were created": botFinishedPeak, "with the jobs finished": botFinished,
		"peak of its restart with them": botRestartPeak, "after that restart": botRestart,
	} {
		if v-botRest >= memBar {
			t.Errorf("bot, %s: %.1f MiB, %.1f MiB above its %.1f MiB at rest; the bar is under %d MiB",
				name, mib(v), mib(v-botRest), mib(botRest), memBar>>20)
		}
	}
	if restarts != 0 {
		t.Errorf("the operator's container restarted %d times", restarts)
	}
	if lost != 0 {
		t.Errorf("%d of the %d queued jobs did not run their whole command", lost, queued)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// envCount is the positive number in $name, def if unset.
func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a number of jobs", name, v)
	}
	return n
}

// padded is a command of commandSize bytes: head, then a quoted run of x
// to fill it, then tail.
func padded(head, tail string) string {
	fill := commandSize - len(head) - len(tail) - 2
	return head + "'" + strings.Repeat("x", fill) + "'" + tail
}

// selfMeasuringCommand is a job's 64 KiB command that prints how much of
// itself reached the shell: "LENGTH queued I", LENGTH that of its filler.
func selfMeasuringCommand(i int) string {
	return padded("x=", fmt.Sprintf("\necho ${#x} queued %d", i))
}

var selfMeasured = regexp.MustCompile(`^queued(\d{5})-`)

// checkSelfMeasured reads the output of each queued job of the test
// through its agent, and counts those that did not print their whole
// filler's length and their own index.
func checkSelfMeasured(t *testing.T, label string, n int) int {
	t.Helper()
	var list shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace), client.MatchingLabels{labelTest: label}); err != nil {
		t.Fatal(err)
	}
	agent := newAgent(t, true)
	var mu sync.Mutex
	lost, seen := 0, 0
	parallel(len(list.Items), 8, func(i int) {
		j := &list.Items[i]
		m := selfMeasured.FindStringSubmatch(j.Name)
		if m == nil {
			return
		}
		idx, _ := strconv.Atoi(m[1])
		want := fmt.Sprintf("%d queued %d\n", len(j.Spec.Command)-len(fmt.Sprintf("x=''\necho ${#x} queued %d", idx)), idx)
		out, err := followAll(agent, j)
		mu.Lock()
		defer mu.Unlock()
		seen++
		if err != nil || out != want {
			lost++
			t.Errorf("%s: output %q, %v; want %q", j.Name, out, err, want)
		}
	})
	if seen != n {
		t.Errorf("%d queued jobs found, want %d", seen, n)
		lost += n - seen
	}
	return lost
}

// createJobs creates n jobs of the test, 32 at a time and past client-go's
// rate limit. They are deleted with the test (deleteJobs).
func createJobs(t *testing.T, n int, job func(i int) *utiltesting.ShellJobWrapper) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS = -1
	creator, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteJobs(t) })
	parallel(n, 32, func(i int) {
		j := job(i).Obj()
		if err := creator.Create(context.Background(), j); err != nil {
			t.Errorf("create %s: %v", j.Name, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
}

// deleteJobs deletes every job of the test, in one call, and waits until
// they are gone. The call is repeated while jobs are left: the API server
// cuts a deletecollection of thousands of objects at its request timeout,
// with part of them deleted.
func deleteJobs(t *testing.T) {
	t.Helper()
	label := testLabel(t)
	var err error
	poll(t, 10*time.Minute, "the jobs of "+t.Name()+" gone", func() (bool, string) {
		n := jobsIn(t, label)
		if n > 0 {
			err = c.DeleteAllOf(context.Background(), &shellv1alpha1.ShellJob{}, client.InNamespace(Namespace),
				client.MatchingLabels{labelTest: label})
		}
		return n == 0, fmt.Sprintf("%d left (the last delete: %v)", n, err)
	})
}

// jobRows lists the test's jobs (all of the namespace's for label "") as
// the API server's table of them: name, number and phase. A table carries
// the printer columns alone, not each job's 64 KiB command.
func jobRows(t *testing.T, label string) [][]string {
	t.Helper()
	args := []string{"-n", Namespace, "get", "shelljobs", "--no-headers", "--ignore-not-found"}
	if label != "" {
		args = append(args, "-l", labelTest+"="+label)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(run(t, args...)), "\n") {
		// NAME # POOL MODE PHASE EXIT OWNER AGE COMMAND
		if f := strings.Fields(line); len(f) >= 5 {
			rows = append(rows, []string{f[0], f[1], f[4]})
		}
	}
	return rows
}

func jobsIn(t *testing.T, label string) int { return len(jobRows(t, label)) }

// waitPhases waits until n jobs of the test are in phase, looking every
// interval.
func waitPhases(t *testing.T, label string, n int, interval time.Duration, phase shellv1alpha1.ShellJobPhase) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Minute)
	for {
		have := 0
		for _, r := range jobRows(t, label) {
			if r[2] == string(phase) {
				have++
			}
		}
		if have >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs %s", have, n, phase)
		}
		time.Sleep(interval)
	}
}

// waitQueued waits until the operator has numbered n jobs of the test and
// left them queued.
func waitQueued(t *testing.T, label string, n int) {
	t.Helper()
	poll(t, 30*time.Minute, fmt.Sprintf("%d jobs numbered and queued", n), func() (bool, string) {
		have := 0
		for _, r := range jobRows(t, label) {
			if _, err := strconv.Atoi(r[1]); err == nil && r[2] == string(shellv1alpha1.PhaseQueued) {
				have++
			}
		}
		return have >= n, fmt.Sprintf("%d queued", have)
	})
}

// roomInQuota raises the chart's ShellJob quota, for the test, so that n
// more jobs fit beside what the namespace holds.
func roomInQuota(t *testing.T, n int64) {
	t.Helper()
	q := jobQuota(t)
	hard, used := q.Spec.Hard[jobstate.QuotaResource], q.Status.Used[jobstate.QuotaResource]
	if used.Value()+n <= hard.Value() {
		return
	}
	t.Logf("the quota of %d jobs has %d used: raised to %d for the test", hard.Value(), used.Value(), used.Value()+n)
	t.Cleanup(func() { setJobQuota(t, hard.Value()) })
	setJobQuota(t, used.Value()+n)
}

// operatorCgroup is the memory cgroup of the leading operator's
// container: the replica that runs the controllers (the other serves the
// stream API alone).
func operatorCgroup(t *testing.T) memCgroup {
	t.Helper()
	return podCgroup(t, Namespace, operatorLeader(t), "manager")
}

// operatorLeader is the pod that holds the operator's leader Lease, once
// one does and runs.
func operatorLeader(t *testing.T) string {
	t.Helper()
	var pod string
	poll(t, OperatorRestartTimeout, "a leading operator pod that runs", func() (ok bool, seen string) {
		pod, ok, seen = runningLeader()
		return ok, seen
	})
	return pod
}

// runningLeader is the pod that holds the operator's leader Lease, and
// whether it runs.
func runningLeader() (pod string, running bool, seen string) {
	var lease coordinationv1.Lease
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: operatorLease}, &lease); err != nil {
		return "", false, err.Error()
	}
	// controller-runtime's identity: the pod's name, "_", a UUID.
	pod, _, _ = strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	phase := strings.TrimSpace(runQuiet("-n", Namespace, "get", "pod", pod, "-o", "jsonpath={.status.phase}"))
	return pod, phase == string(corev1.PodRunning), "holder " + pod + " " + phase
}

// operatorLease is the operator's leader election Lease (cmd/manager).
const operatorLease = "shelljob-operator.shell.shelljob.dev"

// restartWithJobsTimeout covers an operator's start with the benchmark's
// jobs in the namespace: its cache lists them all before it leads.
const restartWithJobsTimeout = 10 * time.Minute

// waitLeaderReplaced waits until the leading operator runs a manager
// container other than old, ready.
func waitLeaderReplaced(t *testing.T, old string, timeout time.Duration) {
	t.Helper()
	poll(t, timeout, "a new leading manager container, ready", func() (bool, string) {
		pod, running, seen := runningLeader()
		if !running {
			return false, seen
		}
		out := strings.TrimSpace(runQuiet("-n", Namespace, "get", "pod", pod, "-o",
			`jsonpath={range .status.containerStatuses[?(@.name=="manager")]}{.containerID} {.ready}{end}`))
		id, ready, _ := strings.Cut(out, " ")
		return id != "" && !strings.Contains(id, old) && ready == "true", pod + ": " + out
	})
}

// runQuiet is run that returns what kubectl wrote, its failure included.
func runQuiet(args ...string) string {
	out, _ := kubectlCmd(args...).CombinedOutput()
	return string(out)
}

// waitReplaced waits until the one pod that selector picks runs a
// container other than old, ready.
func waitReplaced(t *testing.T, selector, container, old string) {
	t.Helper()
	poll(t, OperatorRestartTimeout, "a new "+container+" container, ready", func() (bool, string) {
		out := strings.TrimSpace(run(t, "-n", Namespace, "get", "pods", "-l", selector, "-o",
			`jsonpath={range .items[*].status.containerStatuses[?(@.name=="`+container+`")]}{.containerID} {.ready}{"\n"}{end}`))
		id, ready, _ := strings.Cut(out, " ")
		return !strings.Contains(out, "\n") && id != "" && !strings.Contains(id, old) && ready == "true", out
	})
}

// operatorRestarts sums the restarts of the operator's containers.
func operatorRestarts(t *testing.T) int {
	t.Helper()
	out := run(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=operator", "-o",
		`jsonpath={range .items[*].status.containerStatuses[*]}{.restartCount}{"\n"}{end}`)
	n := 0
	for _, f := range strings.Fields(out) {
		v, _ := strconv.Atoi(f)
		n += v
	}
	return n
}

var storageSize = regexp.MustCompile(`(?m)^apiserver_storage_(?:size_bytes|db_total_size_in_bytes)\{[^}]*\} (\S+)$`)

// etcdFigures are etcd's backend quota, as its static pod sets it
// (--quota-backend-bytes; etcd's default of 2 GiB when unset), and the
// size of its database, as the API server reports it.
func etcdFigures(t *testing.T) (quota int64, set bool, size int64) {
	t.Helper()
	cmd := run(t, "-n", "kube-system", "get", "pods", "-l", "component=etcd", "-o", `jsonpath={.items[0].spec.containers[0].command}`)
	quota = 2 << 30
	if m := regexp.MustCompile(`--quota-backend-bytes=(\d+)`).FindStringSubmatch(cmd); m != nil {
		quota, _ = strconv.ParseInt(m[1], 10, 64)
		set = true
	}
	for _, m := range storageSize.FindAllStringSubmatch(run(t, "get", "--raw", "/metrics"), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err == nil && int64(v) > size {
			size = int64(v)
		}
	}
	return quota, set, size
}
