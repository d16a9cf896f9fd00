//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// Timeouts of the waits, named as Kueue's test/util/constants.go does.
const (
	// PoolReadyTimeout covers worker pods coming up on the kind node.
	PoolReadyTimeout = 3 * time.Minute
	// JobTimeout covers one job's life when it waits for nothing.
	JobTimeout = time.Minute
	// OperatorRestartTimeout covers a killed operator's successor taking
	// the lease (15 s) and catching up.
	OperatorRestartTimeout = 2 * time.Minute
	// Interval is the poll interval of the waits.
	Interval = 100 * time.Millisecond
)

// Where the chart installed shelljob (hack/stack.sh): the jobs and pools
// live in Namespace, the worker pods in WorkerNamespace.
var (
	Namespace       = envOr("E2E_NAMESPACE", "shelljob-system")
	WorkerNamespace = envOr("E2E_WORKER_NAMESPACE", Namespace+"-workers")
)

const (
	// Pool is the pool most tests use; the suite creates it.
	Pool = "e2e"
	// PoolSize is its number of workers.
	PoolSize = 4
	// labelTest marks the jobs of one test, for cleanup.
	labelTest = "e2e.shelljob.dev/test"
	// labelPool marks the pools the suite made, for cleanup (hack/e2e.sh).
	labelPool = "e2e.shelljob.dev/pool"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	c          client.Client
	watcher    client.WithWatch
	restConfig *rest.Config
	kubectl    []string
	// Username is who the suite is to the API server: the origin.user of
	// its jobs, which the chart's origin policy checks.
	Username string
)

func TestMain(m *testing.M) {
	// The suite's controller-runtime clients log through it.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{CurrentContext: os.Getenv("E2E_CONTEXT")}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return err
	}
	if c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if watcher, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	restConfig = cfg
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(context.Background(), review); err != nil {
		return fmt.Errorf("who am I: %w", err)
	}
	Username = review.Status.UserInfo.Username
	kubectl = []string{"kubectl"}
	if k := os.Getenv("KUBECTL"); k != "" {
		kubectl = []string{k}
	}
	if ctx := os.Getenv("E2E_CONTEXT"); ctx != "" {
		kubectl = append(kubectl, "--context", ctx)
	}
	return nil
}

// run runs kubectl and returns its output.
func run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := kubectlCmd(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// kubectlCmd is a kubectl command on the e2e cluster.
func kubectlCmd(args ...string) *exec.Cmd {
	return exec.Command(kubectl[0], append(slices.Clone(kubectl[1:]), args...)...)
}

// poll calls cond every Interval until it holds, or fails the test after
// timeout with what cond last said.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, seen)
		}
		time.Sleep(Interval)
	}
}

// EnsurePoolInput names a pool to create if missing and wait for.
type EnsurePoolInput struct {
	Name     string
	Replicas int32
}

// EnsurePool creates the pool if it is missing and waits until it is
// Available, with every worker of its revision ready.
func EnsurePool(t *testing.T, in EnsurePoolInput) *shellv1alpha1.ShellPool {
	t.Helper()
	ctx := context.Background()
	pool := &shellv1alpha1.ShellPool{}
	err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: in.Name}, pool)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		pool = utiltesting.MakeShellPool(in.Name, Namespace).Replicas(in.Replicas).Obj()
		metav1.SetMetaDataLabel(&pool.ObjectMeta, labelPool, "true")
		if err := c.Create(ctx, pool); err != nil {
			t.Fatalf("create pool %s: %v", in.Name, err)
		}
	}
	return WaitForPoolAvailable(t, in.Name)
}

// WaitForPoolAvailable waits until the pool reports every worker of its
// current revision ready, and no old revision left.
func WaitForPoolAvailable(t *testing.T, name string) *shellv1alpha1.ShellPool {
	t.Helper()
	pool := &shellv1alpha1.ShellPool{}
	poll(t, PoolReadyTimeout, "pool "+name+" available", func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, pool); err != nil {
			return false, err.Error()
		}
		return pool.Status.ObservedGeneration == pool.Generation &&
				meta.IsStatusConditionTrue(pool.Status.Conditions, shellv1alpha1.ShellPoolAvailable) &&
				len(pool.Status.OldRevisions) == 0,
			fmt.Sprintf("ready %s, old revisions %v", pool.Status.Ready, pool.Status.OldRevisions)
	})
	return pool
}

// Job builds a job of the test in the e2e pool.
func Job(t *testing.T, name, command string) *utiltesting.ShellJobWrapper {
	return utiltesting.MakeShellJob(name+"-"+rand.String(4), Namespace).
		Pool(Pool).Command(command).Labels(map[string]string{labelTest: testLabel(t)}).
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: Username})
}

// testLabel is t's name as a label value: subtests' slashes become dots.
func testLabel(t *testing.T) string {
	v := strings.Map(func(r rune) rune {
		switch {
		case r == '/':
			return '.'
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_' // a subtest's name may hold anything; a label may not
	}, t.Name())
	return strings.Trim(v[:min(len(v), validation.LabelValueMaxLength)], "-_.")
}

// Create creates jobs, and deletes them when the test ends.
func Create(t *testing.T, jobs ...*utiltesting.ShellJobWrapper) []*shellv1alpha1.ShellJob {
	t.Helper()
	var out []*shellv1alpha1.ShellJob
	for _, w := range jobs {
		j := w.Obj()
		if err := c.Create(context.Background(), j); err != nil {
			t.Fatalf("create job %s: %v", j.Name, err)
		}
		out = append(out, j)
		t.Cleanup(func() { _ = c.Delete(context.Background(), j) })
	}
	return out
}

// Get reads a job again.
func Get(t *testing.T, j *shellv1alpha1.ShellJob) *shellv1alpha1.ShellJob {
	t.Helper()
	got := &shellv1alpha1.ShellJob{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(j), got); err != nil {
		t.Fatalf("get job %s: %v", j.Name, err)
	}
	return got
}

// WaitForJobPhase waits until the job is in one of the phases.
func WaitForJobPhase(t *testing.T, j *shellv1alpha1.ShellJob, timeout time.Duration, phases ...shellv1alpha1.ShellJobPhase) *shellv1alpha1.ShellJob {
	t.Helper()
	var got *shellv1alpha1.ShellJob
	poll(t, timeout, fmt.Sprintf("job %s in %v", j.Name, phases), func() (bool, string) {
		got = Get(t, j)
		for _, p := range phases {
			if got.Status.Phase == p {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %q, pod %q, conditions %v", got.Status.Phase, got.Status.Pod, got.Status.Conditions)
	})
	return got
}

// WaitForJobEnd waits until the job has finished.
func WaitForJobEnd(t *testing.T, j *shellv1alpha1.ShellJob, timeout time.Duration) *shellv1alpha1.ShellJob {
	t.Helper()
	return WaitForJobPhase(t, j, timeout, shellv1alpha1.PhaseSucceeded, shellv1alpha1.PhaseFailed, shellv1alpha1.PhaseStopped)
}

// Stop sets spec.stop, as .k does, and returns when it was sent.
func Stop(t *testing.T, j *shellv1alpha1.ShellJob) time.Time {
	t.Helper()
	cur := Get(t, j)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Stop = true
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("stop %s: %v", j.Name, err)
	}
	return time.Now()
}

// Output reads what the job's command wrote, through the agent on its
// worker (shelljob-agent follow, over pod exec).
func Output(t *testing.T, j *shellv1alpha1.ShellJob) string {
	t.Helper()
	j = Get(t, j)
	if j.Status.Pod == "" {
		t.Fatalf("job %s has no pod", j.Name)
	}
	return run(t, "-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer, "--",
		agentapi.AgentPath, agentapi.CmdFollow, agentapi.FlagJob, string(j.UID))
}

// ExitCode is the job's exit code, -1 when it has none.
func ExitCode(j *shellv1alpha1.ShellJob) int32 {
	if j.Status.ExitCode == nil {
		return -1
	}
	return *j.Status.ExitCode
}

// Signals lists the signals sent to the job's group.
func Signals(j *shellv1alpha1.ShellJob) []shellv1alpha1.Signal {
	var out []shellv1alpha1.Signal
	for _, s := range j.Status.StopSteps {
		out = append(out, s.Signal)
	}
	return out
}

// FinishedReason is the reason of the job's Finished condition.
func FinishedReason(j *shellv1alpha1.ShellJob) string {
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished); c != nil {
		return c.Reason
	}
	return ""
}

// FillPool starts a long job on every worker of the e2e pool and returns
// them running.
func FillPool(t *testing.T) []*shellv1alpha1.ShellJob {
	t.Helper()
	return fillPool(t, Pool, PoolSize)
}

// fillPool starts a long job on each of the size workers of pool, and
// returns them running.
func fillPool(t *testing.T, pool string, size int) []*shellv1alpha1.ShellJob {
	t.Helper()
	var ws []*utiltesting.ShellJobWrapper
	for i := range size {
		ws = append(ws, Job(t, fmt.Sprintf("busy%d", i), "sleep 300").Pool(pool))
	}
	jobs := Create(t, ws...)
	for i, j := range jobs {
		jobs[i] = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	}
	return jobs
}

// StopAll stops jobs and waits until they ended.
func StopAll(t *testing.T, jobs []*shellv1alpha1.ShellJob) {
	t.Helper()
	for _, j := range jobs {
		Stop(t, j)
	}
	for _, j := range jobs {
		WaitForJobEnd(t, j, JobTimeout)
	}
}

// workerPods lists the pool's worker pods of a revision.
func workerPods(t *testing.T, pool, revision string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(WorkerNamespace),
		client.MatchingLabels{shellv1alpha1.LabelPool: pool, shellv1alpha1.LabelRevision: revision}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// Deliver marks a job delivered, as the bot does once the final and the
// files reached the user: a retired worker waits for it.
func Deliver(t *testing.T, j *shellv1alpha1.ShellJob) {
	t.Helper()
	cur := Get(t, j)
	patch := client.MergeFrom(cur.DeepCopy())
	metav1.SetMetaDataAnnotation(&cur.ObjectMeta, shellv1alpha1.AnnotationDelivered, time.Now().Format(time.RFC3339))
	if err := c.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("deliver %s: %v", j.Name, err)
	}
}

// EventTimes maps the objects of the namespace to the time of their Event
// with the given reason (the latest, if several).
func EventTimes(t *testing.T, reason string) map[string]time.Time {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, e := range list.Items {
		if e.Reason == reason && e.EventTime.After(out[e.Regarding.Name]) {
			out[e.Regarding.Name] = e.EventTime.Time
		}
	}
	return out
}

// now is metav1.Now, for patches.
func now() *metav1.Time { t := metav1.Now(); return &t }
