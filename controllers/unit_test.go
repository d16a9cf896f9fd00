package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// These tests need no API server: the fake client, with interceptor.Funcs
// for the failures.

func fakeScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := shellv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func counter(t *testing.T, c client.Client) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: CounterConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data[CounterKey]
}

func TestNumbererRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	conflicts := 2
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).
		WithObjects(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: CounterConfigMap},
			Data:       map[string]string{CounterKey: "41"},
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if conflicts > 0 {
					conflicts--
					return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, obj.GetName(), nil)
				}
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	n := newNumberer(c, c, c)
	job := utiltesting.MakeShellJob("j", "ns").Obj()
	job.UID = "uid-1"
	got, err := n.number(ctx, job)
	if err != nil || got != 41 {
		t.Fatalf("number = %d, %v; want 41", got, err)
	}
	if next := counter(t, c); next != "49" {
		t.Errorf("counter %s, want 49 (a block of minNumberBlock)", next)
	}
	// A retried pass whose status patch did not land reuses its number.
	if again, _ := n.number(ctx, job); again != 41 {
		t.Errorf("second call gave %d, want 41 again", again)
	}
	if next := counter(t, c); next != "49" {
		t.Errorf("counter %s after a retry, want 49", next)
	}
}

func TestNumbererStartsAboveExistingJobs(t *testing.T) {
	ctx := context.Background()
	old := utiltesting.MakeShellJob("old", "ns").Obj()
	old.Status.Number = 7
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(old).WithStatusSubresource(old).Build()
	n := newNumberer(c, c, c)
	job := utiltesting.MakeShellJob("new", "ns").Obj()
	job.UID = "uid-2"
	if got, err := n.number(ctx, job); err != nil || got != 8 {
		t.Fatalf("number = %d, %v; want 8", got, err)
	}
	if next := counter(t, c); next != "16" {
		t.Errorf("counter %s, want 16", next)
	}
}

// TestNumbererStartsAboveSettledJobs: a lost counter starts above the
// settled jobs too, which the cache leaves out: their number labels count.
func TestNumbererStartsAboveSettledJobs(t *testing.T) {
	ctx := context.Background()
	unsettled := utiltesting.MakeShellJob("unsettled", "ns").Obj()
	unsettled.Status.Number = 7
	settled := utiltesting.MakeShellJob("settled", "ns").Obj()
	settled.Status.Number = 12
	shelljob.Settle(settled, time.Now().Add(time.Hour))
	api := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(unsettled, settled).WithStatusSubresource(unsettled, settled).Build()
	cache := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(unsettled).WithStatusSubresource(unsettled).Build()
	n := newNumberer(api, cache, api)
	job := utiltesting.MakeShellJob("new", "ns").Obj()
	job.UID = "uid-3"
	if got, err := n.number(ctx, job); err != nil || got != 13 {
		t.Fatalf("number = %d, %v; want 13", got, err)
	}
}

// TestNumbererTakesABlockForABurst: one counter update numbers every job
// of the pool that waits for a number; a lone job after it takes one of
// the numbers left, or a block of minNumberBlock.
func TestNumbererTakesABlockForABurst(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for i := range minNumberBlock + 2 {
		j := utiltesting.MakeShellJob(fmt.Sprintf("j%d", i), "ns").Pool("shell").Obj()
		j.UID = types.UID(fmt.Sprintf("uid-%d", i))
		objs = append(objs, j)
	}
	updates := 0
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(objs...).
		WithObjects(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: CounterConfigMap},
			Data:       map[string]string{CounterKey: "10"},
		}).
		WithIndex(&shellv1alpha1.ShellJob{}, indexJobUnnumbered, jobIndexFunc(indexJobUnnumbered)).
		WithInterceptorFuncs(interceptor.Funcs{
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				updates++
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	n := newNumberer(c, c, c)
	for i, o := range objs {
		got, err := n.number(ctx, o.(*shellv1alpha1.ShellJob))
		if err != nil || got != int64(10+i) {
			t.Fatalf("job %d: number %d, %v; want %d", i, got, err, 10+i)
		}
	}
	if updates != 1 || counter(t, c) != "20" {
		t.Errorf("%d counter updates, counter %s; want 1, 20", updates, counter(t, c))
	}
	lone := utiltesting.MakeShellJob("lone", "ns").Pool("other").Obj()
	lone.UID = "uid-lone"
	if got, err := n.number(ctx, lone); err != nil || got != 20 || counter(t, c) != "28" {
		t.Errorf("lone job: number %d, %v, counter %s; want 20, 28", got, err, counter(t, c))
	}
}

// TestNumbererRemembersTheCounter: lone jobs one after another read the
// counter once, then only update it; a counter changed or deleted by
// anyone else is read again, and no number is given twice.
func TestNumbererRemembersTheCounter(t *testing.T) {
	ctx := context.Background()
	gets, updates := 0, 0
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).
		WithObjects(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: CounterConfigMap},
			Data:       map[string]string{CounterKey: "10"},
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.ConfigMap); ok {
					gets++
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				updates++
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	n := newNumberer(c, c, c)
	lone := func(i int) int64 {
		t.Helper()
		j := utiltesting.MakeShellJob(fmt.Sprintf("lone%d", i), "ns").Obj()
		j.UID = types.UID(fmt.Sprintf("uid-lone-%d", i))
		got, err := n.number(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i := range minNumberBlock {
		if got := lone(i); got != int64(10+i) {
			t.Errorf("job %d: number %d, want %d", i, got, 10+i)
		}
	}
	if gets != 1 || updates != 1 {
		t.Errorf("%d reads and %d updates of the counter for %d lone jobs, want 1 and 1", gets, updates, minNumberBlock)
	}

	// Another operator took numbers up to 99.
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: CounterConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[CounterKey] = "100"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if got := lone(minNumberBlock); got != 100 || counter(t, c) != "108" {
		t.Errorf("after a change by another: number %d, counter %s; want 100, 108", got, counter(t, c))
	}

	// Someone deleted the counter: the numbers already taken go first,
	// then it starts again above every number in use (none here, as the
	// jobs were never created).
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < minNumberBlock; i++ {
		if got := lone(minNumberBlock + i); got != int64(100+i) {
			t.Errorf("after a delete, job %d of the block: number %d, want %d", i, got, 100+i)
		}
	}
	if got := lone(2 * minNumberBlock); got != 1 || counter(t, c) != "9" {
		t.Errorf("after a delete: number %d, counter %s; want 1, 9", got, counter(t, c))
	}
}

func TestRevision(t *testing.T) {
	base := utiltesting.MakeShellPool("shell", "ns").Replicas(4).Obj()
	rev := Revision(base, DefaultWorkerImage, WorkerSecurity{})
	same := map[string]func(p *shellv1alpha1.ShellPool){
		"replicas":        func(p *shellv1alpha1.ShellPool) { p.Spec.Replicas = 16 },
		"stateful worker": func(p *shellv1alpha1.ShellPool) { p.Spec.StatefulWorker = 2 },
		"defaults spelled out": func(p *shellv1alpha1.ShellPool) {
			p.Spec.Image, p.Spec.Shell, p.Spec.ImagePullPolicy = DefaultWorkerImage, agentapi.DefaultShell, corev1.PullIfNotPresent
		},
	}
	for name, change := range same {
		p := base.DeepCopy()
		change(p)
		if got := Revision(p, DefaultWorkerImage, WorkerSecurity{}); got != rev {
			t.Errorf("%s: revision %s, want %s unchanged", name, got, rev)
		}
	}
	changed := map[string]func(p *shellv1alpha1.ShellPool){
		"restart":         func(p *shellv1alpha1.ShellPool) { p.Spec.RestartedAt = &metav1.Time{Time: time.Unix(1_800_000_000, 0)} },
		"image":           func(p *shellv1alpha1.ShellPool) { p.Spec.Image = "other:1" },
		"service account": func(p *shellv1alpha1.ShellPool) { p.Spec.ServiceAccountName = "sa" },
		"template":        func(p *shellv1alpha1.ShellPool) { p.Spec.Template.Labels = map[string]string{"a": "b"} },
	}
	for name, change := range changed {
		p := base.DeepCopy()
		change(p)
		if got := Revision(p, DefaultWorkerImage, WorkerSecurity{}); got == rev {
			t.Errorf("%s: revision unchanged", name)
		}
	}
	if Revision(base, "other/worker:2", WorkerSecurity{}) == rev {
		t.Error("a new default worker image kept the revision")
	}
}

// TestWorkerPodNamespaces: with WorkerSecurity's two settings, a worker
// runs in a user namespace of its own with an unmasked /proc and the
// Localhost seccomp profile, unless the pool names a profile of its own;
// the settings make another revision; and the agent learns its spool's
// size either way.
func TestWorkerPodNamespaces(t *testing.T) {
	pool := utiltesting.MakeShellPool("shell", "ns").Obj()
	sec := WorkerSecurity{UserNamespaces: true, SeccompProfile: "shelljob/worker.json"}
	pod := workerPod(pool, "ns-workers", Revision(pool, DefaultWorkerImage, sec), 0, DefaultWorkerImage, sec)
	if h := pod.Spec.HostUsers; h == nil || *h {
		t.Errorf("hostUsers %v, want false", h)
	}
	if pm := pod.Spec.Containers[0].SecurityContext.ProcMount; pm == nil || *pm != corev1.UnmaskedProcMount {
		t.Errorf("procMount %v, want Unmasked", pm)
	}
	want := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("shelljob/worker.json")}
	if diff := cmp.Diff(want, pod.Spec.SecurityContext.SeccompProfile); diff != "" {
		t.Errorf("seccomp (-want +got):\n%s", diff)
	}
	if !slices.Contains(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: agentapi.SpoolSizeLimitEnv, Value: "1073741824"}) {
		t.Errorf("env %v does not give the agent its spool's size", pod.Spec.Containers[0].Env)
	}
	if Revision(pool, DefaultWorkerImage, sec) == Revision(pool, DefaultWorkerImage, WorkerSecurity{}) {
		t.Error("the worker security settings make no other revision")
	}
	own := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	pool.Spec.Template.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: own}
	pod = workerPod(pool, "ns-workers", Revision(pool, DefaultWorkerImage, sec), 0, DefaultWorkerImage, sec)
	if diff := cmp.Diff(own, pod.Spec.SecurityContext.SeccompProfile); diff != "" {
		t.Errorf("the pool's own seccomp profile (-want +got):\n%s", diff)
	}
	pod = workerPod(pool, "ns-workers", Revision(pool, DefaultWorkerImage, WorkerSecurity{}), 0, DefaultWorkerImage, WorkerSecurity{})
	if pod.Spec.HostUsers != nil || pod.Spec.Containers[0].SecurityContext.ProcMount != nil {
		t.Errorf("without the settings: hostUsers %v, procMount %v", pod.Spec.HostUsers, pod.Spec.Containers[0].SecurityContext.ProcMount)
	}
}

// TestWorkerDefaults: a pool's partial resources and securityContext are
// merged over the defaults, field by field, instead of replacing them.
func TestWorkerDefaults(t *testing.T) {
	pool := utiltesting.MakeShellPool("shell", "ns").Obj()
	pool.Spec.Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	pool.Spec.Template.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](2000), RunAsNonRoot: ptr.To(true)}
	pod := workerPod(pool, "ns-workers", Revision(pool, DefaultWorkerImage, WorkerSecurity{}), 0, DefaultWorkerImage, WorkerSecurity{})

	res := pod.Spec.Containers[0].Resources
	want := map[string]string{
		"limits.cpu": "2", "limits.memory": "64Mi", "limits.ephemeral-storage": "2Gi",
		// The default request (128Mi) would exceed the pool's limit.
		"requests.cpu": "100m", "requests.memory": "64Mi", "requests.ephemeral-storage": "256Mi",
	}
	for key, w := range want {
		list := res.Limits
		kind, name, _ := strings.Cut(key, ".")
		if kind == "requests" {
			list = res.Requests
		}
		if q, ok := list[corev1.ResourceName(name)]; !ok || q.String() != w {
			t.Errorf("%s = %v, want %s", key, list[corev1.ResourceName(name)], w)
		}
	}
	sc := pod.Spec.SecurityContext
	if sc.RunAsUser == nil || *sc.RunAsUser != 2000 {
		t.Errorf("runAsUser %v, want the pool's 2000", sc.RunAsUser)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("securityContext %+v lost the default RuntimeDefault seccomp", sc)
	}
	if pool.Spec.Template.SecurityContext.RunAsNonRoot == nil || pool.Spec.Resources.Requests != nil {
		t.Error("building the pod changed the pool")
	}
	// The pool's user does not reach the agent: it runs as root, to run each
	// job as a user of its own, and keeps only what that needs.
	c := pod.Spec.Containers[0]
	wantSC := &corev1.SecurityContext{
		RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0), RunAsNonRoot: ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "KILL", "SETGID", "SETUID"}},
	}
	if diff := cmp.Diff(wantSC, c.SecurityContext); diff != "" {
		t.Errorf("agent's securityContext (-want +got):\n%s", diff)
	}
	if !slices.Contains(c.Args, "--isolation=required") {
		t.Errorf("agent's args %q do not require isolation", c.Args)
	}
}

func TestServiceAccountPolicy(t *testing.T) {
	policy := ServiceAccountPolicy{
		Allowed:  []string{"shell-user", "shelljob-operator"},
		Operator: types.NamespacedName{Namespace: "shelljob-system", Name: "shelljob-operator"},
	}
	cases := map[string]struct {
		policy   ServiceAccountPolicy
		sa       string
		workerNS string
		want     string
	}{
		"none named": {policy: ServiceAccountPolicy{}, workerNS: "shelljob-workers"},
		"listed":     {policy: policy, sa: "shell-user", workerNS: "shelljob-workers"},
		"not listed": {policy: policy, sa: "robot", workerNS: "shelljob-workers", want: `ServiceAccount "robot" is not in the operator's --allowed-service-accounts (shell-user, shelljob-operator)`},
		"empty list": {policy: ServiceAccountPolicy{}, sa: "default", workerNS: "shelljob-workers", want: "--allowed-service-accounts (none)"},
		"the operator's own, listed": {policy: policy, sa: "shelljob-operator", workerNS: "shelljob-system",
			want: `ServiceAccount "shelljob-operator" is the operator's own (shelljob-system/shelljob-operator)`},
		// Another namespace's account of the same name is another account.
		"the operator's name, elsewhere": {policy: policy, sa: "shelljob-operator", workerNS: "shelljob-workers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pool := utiltesting.MakeShellPool("p", "shelljob-system").ServiceAccount(tc.sa).Obj()
			got := tc.policy.Refusal(pool, tc.workerNS)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Refusal: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestShutdownTimeouts: a pass under way when the operator is told to stop
// has time for its agent call and its status write.
func TestShutdownTimeouts(t *testing.T) {
	if longest := agentCallTimeout + statusWriteTimeout; longest >= GracefulShutdownTimeout {
		t.Errorf("an agent call and a status write take up to %v, not below GracefulShutdownTimeout (%v)", longest, GracefulShutdownTimeout)
	}
}

// TestSentSignalsFromTheAgent: a job whose exit the agent reports with the
// signals it sent, which neither this operator's memory nor the status
// holds (the leader that sent them died before it recorded them), ends
// Stopped with them; the longer record wins in every other case.
func TestSentSignalsFromTheAgent(t *testing.T) {
	r := &ShellJobReconciler{memory: newJobMemory()}
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	job := utiltesting.MakeShellJob("stopped", "ns").Obj()
	job.UID, job.Status.Pod = "uid-1", "worker-0"
	key := client.ObjectKeyFromObject(job)
	names := func(sent []sentSignal) (out []shellv1alpha1.Signal) {
		for _, s := range sent {
			out = append(out, s.step.Signal)
		}
		return out
	}

	r.memory.record(key, "worker-0", agentapi.Event{Type: agentapi.EventStarted, Job: "uid-1", Time: at, PGID: 7})
	if got := names(r.sentSignals(job)); len(got) != 0 {
		t.Fatalf("before any signal: %v", got)
	}
	code := 130
	r.memory.record(key, "worker-0", agentapi.Event{Type: agentapi.EventExited, Job: "uid-1", Time: at.Add(time.Second), ExitCode: &code,
		Signals: []agentapi.SentSignal{{Signal: agentapi.SIGINT, Time: at.Add(time.Second)}}})
	sent := r.sentSignals(job)
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT}, names(sent)); diff != "" {
		t.Fatalf("the agent's signals (-want +got):\n%s", diff)
	}
	job.Status.StopSteps = steps(sent)
	f, _ := r.memory.facts(key, job.UID)
	if ev := shelljob.SetExited(job, exitOf(f), "", at.Add(2*time.Second)); job.Status.Phase != shellv1alpha1.PhaseStopped {
		t.Errorf("phase %s (%s), want Stopped", job.Status.Phase, ev.Note)
	}

	job.Status.StopSteps = []shellv1alpha1.StopStep{{Signal: shellv1alpha1.SIGINT}, {Signal: shellv1alpha1.SIGTERM}}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, names(r.sentSignals(job))); diff != "" {
		t.Errorf("a longer status (-want +got):\n%s", diff)
	}
	job.Status.StopSteps = nil
	job.Status.Pod = "worker-1"
	if got := names(r.sentSignals(job)); len(got) != 0 {
		t.Errorf("the facts of another worker count: %v", got)
	}
}

// The indexes hold unfinished jobs alone, but for the undelivered one,
// which holds finished jobs alone: thousands of finished jobs cost the
// indexes nothing. The UID index holds the jobs given a worker alone: a
// backlog waiting for one costs it nothing either.
func TestJobIndexes(t *testing.T) {
	job := func(phase shellv1alpha1.ShellJobPhase, number int64, delivered bool) *shellv1alpha1.ShellJob {
		j := utiltesting.MakeShellJob("j", "ns").Pool("shell").Obj()
		j.UID = "u1"
		j.Status.Phase, j.Status.Number, j.Status.Pod = phase, number, "w1"
		if delivered {
			j.Annotations = map[string]string{shellv1alpha1.AnnotationDelivered: "x"}
		}
		return j
	}
	for name, tc := range map[string]struct {
		job  *shellv1alpha1.ShellJob
		want map[string][]string
	}{
		"running, unnumbered": {job(shellv1alpha1.PhaseRunning, 0, false), map[string][]string{
			poolIndexName: {"ns/shell"}, indexJobUnnumbered: {"shell"}, indexJobPod: {"w1"}, indexJobUID: {"u1"}}},
		"running": {job(shellv1alpha1.PhaseRunning, 4, false), map[string][]string{
			poolIndexName: {"ns/shell"}, indexJobPod: {"w1"}, indexJobUID: {"u1"}}},
		"queued": {func() *shellv1alpha1.ShellJob {
			j := job(shellv1alpha1.PhaseQueued, 4, false)
			j.Status.Pod = ""
			return j
		}(), map[string][]string{poolIndexName: {"ns/shell"}}},
		"finished":            {job(shellv1alpha1.PhaseSucceeded, 4, false), map[string][]string{indexJobUndelivered: {"w1"}}},
		"finished, delivered": {job(shellv1alpha1.PhaseStopped, 4, true), map[string][]string{}},
	} {
		t.Run(name, func(t *testing.T) {
			got := map[string][]string{}
			for field, fn := range jobIndexes {
				if v := fn(tc.job); v != nil {
					got[field] = v
				}
			}
			if v, err := unfinishedPool(tc.job); err != nil || v != nil {
				got[poolIndexName] = v
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("index values (-want +got):\n%s", diff)
			}
		})
	}
}

// A pass that records a placement starts the command at once, so a quick
// command's exit can reach the streams before the cache shows the job on
// its worker, where the agents' index finds it: the exit is kept for the
// job this process started, and its pass is woken. An event of a job this
// process did not start, or forgot, is dropped as before.
func TestStreamsKeepTheExitOfAJobJustStarted(t *testing.T) {
	queued := utiltesting.MakeShellJob("quick", "ns").Obj()
	queued.UID = "uid-quick"
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(queued).
		WithIndex(&shellv1alpha1.ShellJob{}, indexJobUID, jobIndexFunc(indexJobUID)).Build()
	memory := newJobMemory()
	notify := make(chan event.TypedGenericEvent[*shellv1alpha1.ShellJob], 4)
	s := newWorkerStreams(nil, c, memory, notify, clocktesting.NewFakeClock(time.Now()), logr.Discard())
	w := worker{pod: types.NamespacedName{Namespace: "workers", Name: "worker-0"}, jobs: "ns"}
	key := client.ObjectKeyFromObject(queued)
	code := 0
	exit := func(uid types.UID) agentapi.Event {
		return agentapi.Event{Type: agentapi.EventExited, Job: string(uid), Time: time.Now(), ExitCode: &code}
	}

	s.handle(context.Background(), w, exit("uid-other"))
	if _, ok := memory.facts(types.NamespacedName{Namespace: "ns", Name: "other"}, "uid-other"); ok || len(notify) != 0 {
		t.Fatalf("the exit of a job this process did not start was kept (%d wakes)", len(notify))
	}

	memory.noteStart(key, queued.UID)
	s.handle(context.Background(), w, exit(queued.UID))
	f, ok := memory.facts(key, queued.UID)
	if !ok || !f.Exited || f.Pod != "worker-0" {
		t.Fatalf("facts %+v (reported %v), want the exit on worker-0", f, ok)
	}
	select {
	case ev := <-notify:
		if got := client.ObjectKeyFromObject(ev.Object); got != key {
			t.Fatalf("woke %v, want %v", got, key)
		}
	default:
		t.Fatal("the job's pass was not woken")
	}

	memory.forget(key, queued.UID)
	s.handle(context.Background(), w, exit(queued.UID))
	if _, ok := memory.facts(key, queued.UID); ok || len(notify) != 0 {
		t.Fatalf("the exit of a forgotten job was kept (%d wakes)", len(notify))
	}
}

// TestStopReasonKeptInMemory: a timeout's first signal was sent, but the
// status write that recorded the stop conflicted with another write to the
// job; the exit then ends the job stopped for the timeout, not for no
// reason.
func TestStopReasonKeptInMemory(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	job := utiltesting.MakeShellJob("timed-out", "ns").Pool("shell").Obj()
	job.UID = "uid-timed-out"
	job.Status = shellv1alpha1.ShellJobStatus{Phase: shellv1alpha1.PhaseRunning, Number: 3, Pod: "worker-0", Ran: true, PGID: 7,
		StartTime: ptr.To(metav1.NewTime(at))}
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(job).WithStatusSubresource(job).Build()
	r := &ShellJobReconciler{
		Client: c, APIReader: c, Recorder: events.NewFakeRecorder(16), Clock: clocktesting.NewFakeClock(at.Add(time.Minute)),
		JobTTL: KeepFinishedJobs, memory: newJobMemory(), numbers: newNumberer(c, c, c), writes: newWrites(),
	}
	key := client.ObjectKeyFromObject(job)
	r.memory.noteSignal(key, job.UID, sentSignal{step: shellv1alpha1.StopStep{Signal: shellv1alpha1.SIGINT, Time: metav1.NewTime(at)},
		at: at, reason: shellv1alpha1.StopReasonTimeout})
	code := 130
	r.memory.record(key, "worker-0", agentapi.Event{Type: agentapi.EventExited, Job: string(job.UID), Time: at.Add(time.Second), ExitCode: &code,
		Signals: []agentapi.SentSignal{{Signal: agentapi.SIGINT, Time: at}}})

	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := getJobFrom(t, c, key)
	if got.Status.Phase != shellv1alpha1.PhaseStopped || got.Status.StopReason != shellv1alpha1.StopReasonTimeout {
		t.Errorf("phase %s, stop reason %q, want Stopped for %s", got.Status.Phase, got.Status.StopReason, shellv1alpha1.StopReasonTimeout)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, shellv1alpha1.ShellJobFinished); c == nil || strings.Contains(c.Message, "()") {
		t.Errorf("finished condition %+v names no reason", c)
	}
}
