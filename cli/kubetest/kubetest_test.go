package kubetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/cli"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

var env *testenv.Env

func TestMain(m *testing.M) { clustertest.Main(m, &env) }

// applyPolicy creates the objects of a file of config/policy, each after
// edit, if not nil.
func applyPolicy(t *testing.T, file string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "policy", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(&obj)
		}
		if err := env.Client.Create(context.Background(), &obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// as is a client for user, a cluster admin by group, so that only the
// policy can refuse it.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// originPolicy applies config/policy's origin policy, as a cluster has
// it, and waits until the API server enforces it in ns: the plugin then
// names its user in the jobs it creates, whom the stream API's owner
// rule lets read them through myshelljobs.
func originPolicy(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	applyPolicy(t, "origin.yaml", nil)
	probe := as(t, "policy-probe")
	forged := utiltesting.MakeShellJob("probe", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "someone-else"})
	for probe.Create(ctx, forged.Clone().Obj(), client.DryRunAll) == nil {
		if ctx.Err() != nil {
			t.Fatal("the origin policy is not enforced")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// plugin runs kubectl-shelljob on the envtest kubeconfig as user, in ns,
// and returns stdout, stderr and the exit code.
func plugin(ctx context.Context, user, ns string, in io.Reader, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	cmd := cli.NewCmd(cli.Options{IOStreams: genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut}})
	cmd.SetArgs(append([]string{"--kubeconfig", env.Kubeconfig, "-n", ns, "--as", user, "--as-group", "system:masters"}, args...))
	cmd.SetContext(ctx)
	code := cli.Main(cmd, &errOut)
	return out.String(), errOut.String(), code
}

// The origin policy refuses a CLI job that names anyone but its creator,
// and a Telegram job from anyone but the bot acting for its sender (the
// Telegram user extra that only the bot may impersonate, here the admin's
// impersonation); the plugin names its creator as the API server sees
// them, so its jobs pass.
func TestOriginPolicy(t *testing.T) {
	applyPolicy(t, "origin.yaml", nil)
	ns := env.Namespace(t, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := as(t, "alice")

	forged := utiltesting.MakeShellJob("forged", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "bob"})
	// The API server picks the policy up within a few seconds.
	var err error
	for ctx.Err() == nil {
		err = alice.Create(ctx, forged.Clone().Obj())
		if err != nil {
			break
		}
		_ = env.Client.Delete(ctx, forged.Obj())
		time.Sleep(200 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "spec.origin.user of a job from the CLI must be the user who creates it, alice") {
		t.Fatalf("a forged user: %v", err)
	}
	tg := utiltesting.MakeShellJob("tg", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "alice", TelegramUser: 42})
	const onlyBot = "only the shelljob bot creates jobs from Telegram"
	if err := alice.Create(ctx, tg.Obj()); err == nil || !strings.Contains(err.Error(), onlyBot) {
		t.Errorf("a Telegram job from a person: %v", err)
	}
	bot := as(t, "system:serviceaccount:shelljob-system:shelljob-bot")
	if err := bot.Create(ctx, tg.Clone().Obj()); err == nil || !strings.Contains(err.Error(), onlyBot) {
		t.Errorf("a Telegram job from the bot as itself: %v", err)
	}
	cfg := rest.CopyConfig(env.Config)
	// A cluster admin by group, as as's users are, so that only the policy
	// can refuse it.
	cfg.Impersonate = identity.Identity{TelegramUser: 42, User: "alice", Groups: []string{"system:masters"}}.Impersonation()
	forAlice, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := forAlice.Create(ctx, tg.Clone().Obj()); err != nil {
		t.Errorf("a Telegram job for its sender: %v", err)
	}
	honest := utiltesting.MakeShellJob("honest", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "alice"})
	if err := alice.Create(ctx, honest.Obj()); err != nil {
		t.Errorf("alice's own job: %v", err)
	}

	// The plugin's exec: the origin-user policy is not there, so the API
	// server refuses its job; it asks who it is, names the user, and
	// creates the job again.
	if job := pluginExec(ctx, t, "carol", ns); job.Spec.Origin.User != "carol" {
		t.Errorf("job %s, origin %+v", job.Name, job.Spec.Origin)
	}
}

// pluginExec runs the plugin's exec of `exit 3` as user in ns, plays the
// operator's end of its job (no operator runs), checks that the plugin
// exits 3, and returns the job.
func pluginExec(ctx context.Context, t *testing.T, user, ns string) *shellv1alpha1.ShellJob {
	t.Helper()
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := plugin(ctx, user, ns, strings.NewReader(""), "exec", "--pool", "p", "--", "exit", "3")
		done <- result{out, errOut, code}
	}()
	var job *shellv1alpha1.ShellJob
	for job == nil && ctx.Err() == nil {
		var list shellv1alpha1.ShellJobList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if list.Items[i].Spec.Command == "exit 3" {
				job = &list.Items[i]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if job == nil {
		t.Fatal("the plugin created no job")
	}
	if o := job.Spec.Origin; o.Source != shellv1alpha1.OriginCLI || !strings.HasPrefix(job.Name, "cli-") {
		t.Errorf("job %s, origin %+v", job.Name, o)
	}
	three := int32(3)
	job.Status.Number, job.Status.Phase, job.Status.ExitCode = 7, shellv1alpha1.PhaseFailed, &three
	shelljob.SetFinishedCondition(job, time.Now(), shellv1alpha1.ShellJobFinishedReasonExited, "")
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != 3 {
			t.Errorf("exec: exit %d, stderr %q", r.code, r.errOut)
		}
	case <-ctx.Done():
		t.Fatal("exec did not end with its job")
	}
	return job
}

// TestOriginUserFilledIn: with the origin-user policy, the API server fills
// in the user of a CLI job that names none, and the plugin asks nobody who
// it is; a forged user is still refused.
func TestOriginUserFilledIn(t *testing.T) {
	ns := env.Namespace(t, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The binding only for this test's namespace: the others show a
	// cluster without the policy.
	const label = "kubetest.shelljob.dev/origin-user"
	var nsObj corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[label] = "true"
	if err := env.Client.Update(ctx, &nsObj); err != nil {
		t.Fatal(err)
	}
	applyPolicy(t, "origin.yaml", nil)
	applyPolicy(t, "origin-user.yaml", func(obj *unstructured.Unstructured) {
		if obj.GetKind() == "MutatingAdmissionPolicyBinding" {
			_ = unstructured.SetNestedStringMap(obj.Object, map[string]string{label: "true"},
				"spec", "matchResources", "namespaceSelector", "matchLabels")
		}
	})
	alice := as(t, "alice")
	nameless := utiltesting.MakeShellJob("nameless", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI})
	// The API server picks the policies up within a few seconds: until
	// then, the origin policy refuses the job.
	var err error
	for ctx.Err() == nil {
		if err = alice.Create(ctx, nameless.Clone().Obj()); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var job shellv1alpha1.ShellJob
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nameless"}, &job); err != nil || job.Spec.Origin.User != "alice" {
		t.Fatalf("a job that names no user: origin %+v, %v", job.Spec.Origin, err)
	}
	forged := utiltesting.MakeShellJob("forged", ns).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "bob"})
	if err := alice.Create(ctx, forged.Obj()); err == nil || !strings.Contains(err.Error(), "spec.origin.user of a job from the CLI must be the user who creates it, alice") {
		t.Errorf("a forged user: %v", err)
	}

	// A job with no origin at all gets the schema's error, not the
	// policy's CEL error about a missing key.
	originless := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": shellv1alpha1.GroupVersion.String(), "kind": "ShellJob",
		"metadata": map[string]any{"name": "originless", "namespace": ns},
		"spec":     map[string]any{"command": "true"},
	}}
	if err := alice.Create(ctx, originless); err == nil || !strings.Contains(err.Error(), "spec.origin: Required value") || strings.Contains(err.Error(), "no such key") {
		t.Errorf("a job with no origin: %v", err)
	}

	before := selfSubjectReviews(ctx, t)
	if job := pluginExec(ctx, t, "carol", ns); job.Spec.Origin.User != "carol" {
		t.Errorf("job %s, origin %+v", job.Name, job.Spec.Origin)
	}
	if after := selfSubjectReviews(ctx, t); after != before {
		t.Errorf("the plugin asked who it is (%v SelfSubjectReviews before, %v after)", before, after)
	}
}

// selfSubjectReviews is how many SelfSubjectReviews the API server has
// answered, from its metrics.
func selfSubjectReviews(ctx context.Context, t *testing.T) float64 {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	data, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="selfsubjectreviews"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// ls, stop and pools read and patch what the operator would have written.
func TestLsStopPools(t *testing.T) {
	ns := env.Namespace(t, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(4).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status.Ready, pool.Status.ReadyReplicas, pool.Status.BusyReplicas, pool.Status.QueuedJobs = "3/4", 3, 2, 5
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	dave := as(t, "dave")
	mk := func(name, cmd string, n int64, phase shellv1alpha1.ShellJobPhase, finished bool) {
		j := utiltesting.MakeShellJob(name, ns).Command(cmd).Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "dave"}).Obj()
		if err := dave.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		j.Status.Number, j.Status.Phase, j.Status.Summary = n, phase, shelljob.Summary(cmd)
		if finished {
			shelljob.SetFinishedCondition(j, time.Now(), shellv1alpha1.ShellJobFinishedReasonExited, "")
		}
		if err := env.Client.Status().Update(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	long := "echo " + strings.Repeat("x", 100)
	mk("running", long, 1, shellv1alpha1.PhaseRunning, false)
	mk("queued", "sleep 5", 2, shellv1alpha1.PhaseQueued, false)
	mk("done", "true", 3, shellv1alpha1.PhaseSucceeded, true)

	out, errOut, code := plugin(ctx, "dave", ns, nil, "ls")
	if code != 0 || !regexpLine(out, "#", "NAME", "AGE", "PHASE", "OWNER", "COMMAND") || !strings.Contains(out, shelljob.Summary(long)) ||
		!strings.Contains(out, "Queued") || strings.Contains(out, "done") || !strings.Contains(out, "dave") {
		t.Errorf("ls: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := plugin(ctx, "dave", ns, nil, "ls", "--all"); !strings.Contains(out, "Succeeded") {
		t.Errorf("ls --all:\n%s", out)
	}
	if out, errOut, code := plugin(ctx, "dave", ns, nil, "pools"); code != 0 || !regexpLine(out, "shell", "3/4", "2", "5") {
		t.Errorf("pools: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = plugin(ctx, "dave", ns, nil, "stop", "1", "#3", "queued", "9")
	want := "⏹ Stopping #1…\n#3 has already ended.\n⏹ Stopping #2…\n"
	if code != 1 || out != want || !strings.Contains(errOut, "No running command #9 here.") {
		t.Errorf("stop: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	if out, _, _ := plugin(ctx, "dave", ns, nil, "stop", "running"); out != "#1 is already stopping.\n" {
		t.Errorf("stop again: %q", out)
	}
	var j shellv1alpha1.ShellJob
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "running"}, &j); err != nil || !j.Spec.Stop || j.Spec.StopReason != shellv1alpha1.StopReasonUser {
		t.Errorf("running: stop %v, reason %q, %v", j.Spec.Stop, j.Spec.StopReason, err)
	}
	if out, _, code := plugin(ctx, "dave", ns, nil, "stop", "--all"); code != 0 || out != "#1 is already stopping.\n#2 is already stopping.\n" {
		t.Errorf("stop --all: exit %d, %q", code, out)
	}
	empty := env.Namespace(t, "cli")
	if out, _, _ := plugin(ctx, "dave", empty, nil, "stop", "--all"); out != "No running command here.\n" {
		t.Errorf("stop --all with none: %q", out)
	}
	if _, errOut, code := plugin(ctx, "dave", ns, nil, "stop"); code != 1 || !strings.HasPrefix(errOut, "error: ") {
		t.Errorf("stop alone: exit %d, %q", code, errOut)
	}
}

// regexpLine tells whether a line of out holds the fields in order.
func regexpLine(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// TestExecQuotaFull: a job that the namespace's full ShellJob quota
// refuses (the ResourceQuota admission plugin of the real API server)
// makes `kubectl shelljob exec` say so in words and exit 1, and nothing
// is created.
func TestExecQuotaFull(t *testing.T) {
	ns := env.Namespace(t, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quota := env.FullJobQuota(t, ns, 3)
	out, errOut, code := plugin(ctx, "dave", ns, strings.NewReader(""), "exec", "--pool", "p", "--", "echo", "hi")
	want := "error: create shelljob in namespace " + ns + ": the ShellJob quota is full: 3 used of 3 (ResourceQuota " + quota +
		"); finished jobs count until they expire or are deleted\n"
	if code != 1 || errOut != want || out != "" {
		t.Errorf("exec under a full quota: exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, out, errOut, want)
	}
	var list shellv1alpha1.ShellJobList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("%d jobs in the namespace, %v: want none", len(list.Items), err)
	}
}
