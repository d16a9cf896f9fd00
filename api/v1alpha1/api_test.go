package v1alpha1_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// These tests run against a real kube-apiserver: they check what the CRD
// schema, its defaults, CEL rules, printer columns and subresources do.

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func namespace(t *testing.T) string { return env.Namespace(t, "api") }

func TestShellJobDefaults(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	job := utiltesting.MakeShellJob("defaults", ns).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}
	want := shellv1alpha1.ShellJobSpec{
		Command: "true",
		Mode:    shellv1alpha1.ModeFork,
		Pool:    shellv1alpha1.DefaultPool,
		Origin:  shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "tester"},
	}
	if diff := cmp.Diff(want, job.Spec); diff != "" {
		t.Errorf("spec after create (-want +got):\n%s", diff)
	}
}

func TestShellPoolDefaults(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	pool := utiltesting.MakeShellPool("shell", ns).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatalf("create: %v", err)
	}
	// spec.shell defaults to the worker pod contract's shell.
	want := shellv1alpha1.ShellPoolSpec{Replicas: 16, StatefulWorker: 0, Shell: agentapi.DefaultShell, SpoolSizeLimit: ptr.To(resource.MustParse("1Gi"))}
	if diff := cmp.Diff(want, pool.Spec, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("spec after create (-want +got):\n%s", diff)
	}
	// An approval that names nothing waits ten minutes in the job's chat.
	approving := utiltesting.MakeShellPool("approving", ns).Obj()
	approving.Spec.Approval = &shellv1alpha1.ShellPoolApproval{}
	if err := env.Client.Create(ctx, approving); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := *approving.Spec.Approval; got != (shellv1alpha1.ShellPoolApproval{TimeoutSeconds: 600}) {
		t.Errorf("approval after create: %+v, want a timeout of 600 s", got)
	}
}

func TestShellJobCreateValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := map[string]struct {
		job     *shellv1alpha1.ShellJob
		wantErr string
	}{
		"empty command": {
			job:     utiltesting.MakeShellJob("empty", ns).Command("").Obj(),
			wantErr: "command must not be empty",
		},
		"64 KiB of ASCII is accepted": {
			job: utiltesting.MakeShellJob("max", ns).Command(strings.Repeat("x", 64<<10)).Obj(),
		},
		"over 64 KiB in bytes, under in characters": {
			job:     utiltesting.MakeShellJob("bytes", ns).Command(strings.Repeat("é", 40000)).Obj(),
			wantErr: "command must be at most 64 KiB",
		},
		"over 64 KiB of ASCII": {
			job:     utiltesting.MakeShellJob("long", ns).Command(strings.Repeat("x", 64<<10+1)).Obj(),
			wantErr: "Too long",
		},
		"a console": {
			job: utiltesting.MakeShellJob("console", ns).Mode(shellv1alpha1.ModeConsole).Command("exec zsh -l").Obj(),
		},
		"unknown mode": {
			job:     utiltesting.MakeShellJob("mode", ns).Mode("Detached").Obj(),
			wantErr: `spec.mode: Unsupported value: "Detached"`,
		},
		"unknown origin": {
			job: utiltesting.MakeShellJob("origin", ns).
				Origin(shellv1alpha1.ShellJobOrigin{Source: "slack"}).Obj(),
			wantErr: `spec.origin.source: Unsupported value: "slack"`,
		},
		"unknown stop reason": {
			job:     utiltesting.MakeShellJob("reason", ns).Stop("Boredom").Obj(),
			wantErr: `spec.stopReason: Unsupported value: "Boredom"`,
		},
		"stopped at creation": {
			job: utiltesting.MakeShellJob("stopped", ns).Stop(shellv1alpha1.StopReasonShutdown).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.job)
			checkErr(t, err, tc.wantErr)
		})
	}
}

func TestShellJobUpdateValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := map[string]struct {
		job     *utiltesting.ShellJobWrapper
		update  func(*shellv1alpha1.ShellJob)
		wantErr string
	}{
		"command is immutable": {
			job:     utiltesting.MakeShellJob("cmd", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Command = "rm -rf /" },
			wantErr: "command is immutable",
		},
		"mode is immutable": {
			job:     utiltesting.MakeShellJob("mode", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Mode = shellv1alpha1.ModeDirect },
			wantErr: "mode is immutable",
		},
		"pool is immutable": {
			job:     utiltesting.MakeShellJob("pool", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Pool = "plugin" },
			wantErr: "pool is immutable",
		},
		"origin is immutable": {
			job:     utiltesting.MakeShellJob("origin", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Origin.User = "mallory" },
			wantErr: "origin is immutable",
		},
		"stop false to true": {
			job: utiltesting.MakeShellJob("stop", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.Stop = true
				j.Spec.StopReason = shellv1alpha1.StopReasonUser
			},
		},
		"stop true to false": {
			job:     utiltesting.MakeShellJob("unstop", ns).Stop(shellv1alpha1.StopReasonUser),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Stop = false },
			wantErr: "stop cannot be undone",
		},
		"stop reason after stop": {
			job:     utiltesting.MakeShellJob("reason", ns).Stop(shellv1alpha1.StopReasonUser),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.StopReason = shellv1alpha1.StopReasonTimeout },
			wantErr: "stopReason cannot change once stop is set",
		},
		"hold cleared": {
			job:    utiltesting.MakeShellJob("unhold", ns).Hold(),
			update: func(j *shellv1alpha1.ShellJob) { j.Spec.Hold = false },
		},
		"hold set after creation": {
			job:     utiltesting.MakeShellJob("hold", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Hold = true },
			wantErr: "hold can only be cleared",
		},
		"stopBy with stop": {
			job: utiltesting.MakeShellJob("stop-by", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.Stop, j.Spec.StopBy = true, "bob"
			},
		},
		"stopBy without stop": {
			job:     utiltesting.MakeShellJob("stop-by-alone", ns),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.StopBy = "bob" },
			wantErr: "stopBy is set with stop",
		},
		"stopBy after stop": {
			job:     utiltesting.MakeShellJob("stop-by-after", ns).Stop(shellv1alpha1.StopReasonUser).StopBy("alice"),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.StopBy = "bob" },
			wantErr: "stopBy cannot change once stop is set",
		},
		"stopBy added after stop": {
			job:     utiltesting.MakeShellJob("stop-by-added", ns).Stop(shellv1alpha1.StopReasonUser),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.StopBy = "bob" },
			wantErr: "stopBy cannot change once stop is set",
		},
		"approval set": {
			job: utiltesting.MakeShellJob("approve", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: shellv1alpha1.ApprovalApproved, By: "bob", TelegramUser: 42}
			},
		},
		"approval changed": {
			job:     utiltesting.MakeShellJob("reapprove", ns).Approval(shellv1alpha1.ApprovalDenied, "bob"),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Approval.Decision = shellv1alpha1.ApprovalApproved },
			wantErr: "approval cannot change once set",
		},
		"approval removed": {
			job:     utiltesting.MakeShellJob("unapprove", ns).Approval(shellv1alpha1.ApprovalApproved, "bob"),
			update:  func(j *shellv1alpha1.ShellJob) { j.Spec.Approval = nil },
			wantErr: "approval cannot change once set",
		},
		"approval of no one": {
			job: utiltesting.MakeShellJob("anonymous", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: shellv1alpha1.ApprovalApproved}
			},
			wantErr: "spec.approval.by",
		},
		"approval of another kind": {
			job: utiltesting.MakeShellJob("maybe", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: "Maybe", By: "bob"}
			},
			wantErr: "spec.approval.decision: Unsupported value",
		},
		"limits may change": {
			job: utiltesting.MakeShellJob("limits", ns),
			update: func(j *shellv1alpha1.ShellJob) {
				j.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
				j.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := tc.job.Obj()
			if err := env.Client.Create(ctx, job); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.update(job)
			checkErr(t, env.Client.Update(ctx, job), tc.wantErr)
		})
	}
}

func TestShellPoolValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	cases := map[string]struct {
		pool    *shellv1alpha1.ShellPool
		wantErr string
	}{
		"stateful worker within replicas": {
			pool: utiltesting.MakeShellPool("ok", ns).Replicas(4).StatefulWorker(3).Obj(),
		},
		"stateful worker beyond replicas": {
			pool:    utiltesting.MakeShellPool("beyond", ns).Replicas(4).StatefulWorker(4).Obj(),
			wantErr: "statefulWorker must be below replicas",
		},
		"negative stateful worker": {
			pool:    utiltesting.MakeShellPool("negative", ns).StatefulWorker(-1).Obj(),
			wantErr: "spec.statefulWorker: Invalid value: -1",
		},
		"one running job per user": {
			pool: utiltesting.MakeShellPool("one-each", ns).MaxRunningPerUser(1).Obj(),
		},
		"no running job per user": {
			pool:    utiltesting.MakeShellPool("none-each", ns).MaxRunningPerUser(0).Obj(),
			wantErr: "spec.maxRunningPerUser: Invalid value: 0",
		},
		"negative approval timeout": {
			pool:    utiltesting.MakeShellPool("negative-wait", ns).Approval(-1).Obj(),
			wantErr: "spec.approval.timeoutSeconds: Invalid value: -1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkErr(t, env.Client.Create(ctx, tc.pool), tc.wantErr)
		})
	}
}

// TestShellPoolFieldValidation: a pool's image, shell and ServiceAccount
// are refused with a message that names the field and says what it takes.
func TestShellPoolFieldValidation(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	digest := "@sha256:" + strings.Repeat("0123456789abcdef", 4)
	cases := map[string]struct {
		pool    client.Object
		wantErr string
	}{
		"image with registry, port, tag and digest": {
			pool: utiltesting.MakeShellPool("full-image", ns).Image("registry.example.com:5000/team/worker:1.2" + digest).Obj(),
		},
		"image by name only": {
			pool: utiltesting.MakeShellPool("short-image", ns).Image("worker").Obj(),
		},
		"empty image": {
			pool:    withSpecField(t, utiltesting.MakeShellPool("empty-image", ns).Obj(), "image", ""),
			wantErr: "image must not be empty",
		},
		"image with a space": {
			pool:    utiltesting.MakeShellPool("space-image", ns).Image("shelljob/worker :0.1.0").Obj(),
			wantErr: "image must not contain whitespace",
		},
		"image with a newline": {
			pool:    utiltesting.MakeShellPool("newline-image", ns).Image("shelljob/worker:0.1.0\n").Obj(),
			wantErr: "image must not contain whitespace",
		},
		"image with an upper-case path": {
			pool:    utiltesting.MakeShellPool("upper-image", ns).Image("shelljob/Worker:0.1.0").Obj(),
			wantErr: "image must be an image reference",
		},
		"image as a URL": {
			pool:    utiltesting.MakeShellPool("url-image", ns).Image("https://example.com/worker").Obj(),
			wantErr: "image must be an image reference",
		},
		"image with an empty tag": {
			pool:    utiltesting.MakeShellPool("tag-image", ns).Image("shelljob/worker:").Obj(),
			wantErr: "image must be an image reference",
		},
		"image too long": {
			pool:    utiltesting.MakeShellPool("long-image", ns).Image(strings.Repeat("a", 513)).Obj(),
			wantErr: "spec.image: Too long",
		},
		"shell by name": {
			pool: utiltesting.MakeShellPool("shell-name", ns).Shell("bash").Obj(),
		},
		"shell by absolute path": {
			pool: utiltesting.MakeShellPool("shell-path", ns).Shell("/usr/bin/zsh").Obj(),
		},
		"relative shell path": {
			pool:    utiltesting.MakeShellPool("shell-relative", ns).Shell("bin/zsh").Obj(),
			wantErr: "shell must be an absolute path",
		},
		"shell with arguments": {
			pool:    utiltesting.MakeShellPool("shell-args", ns).Shell("/bin/zsh -x").Obj(),
			wantErr: "shell must not contain whitespace",
		},
		"shell with a NUL": {
			pool:    utiltesting.MakeShellPool("shell-nul", ns).Shell("/bin/zsh\x00").Obj(),
			wantErr: "shell must be an absolute path",
		},
		"shell too long": {
			pool:    utiltesting.MakeShellPool("shell-long", ns).Shell("/" + strings.Repeat("a", 1024)).Obj(),
			wantErr: "spec.shell: Too long",
		},
		"service account": {
			pool: utiltesting.MakeShellPool("sa", ns).ServiceAccount("shell-user").Obj(),
		},
		"service account with dots": {
			pool: utiltesting.MakeShellPool("sa-dots", ns).ServiceAccount("ci.runner-2").Obj(),
		},
		"service account not a DNS subdomain": {
			pool:    utiltesting.MakeShellPool("sa-upper", ns).ServiceAccount("Shell_User").Obj(),
			wantErr: "serviceAccountName must be a DNS-1123 subdomain",
		},
		"service account with a path": {
			pool:    utiltesting.MakeShellPool("sa-path", ns).ServiceAccount("kube-system/default").Obj(),
			wantErr: "serviceAccountName must be a DNS-1123 subdomain",
		},
		"service account too long": {
			pool:    utiltesting.MakeShellPool("sa-long", ns).ServiceAccount(strings.Repeat("a", 254)).Obj(),
			wantErr: "spec.serviceAccountName: Too long",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkErr(t, env.Client.Create(ctx, tc.pool), tc.wantErr)
		})
	}
}

// withSpecField is pool with spec.field set to value even where the Go
// type would leave it out (an empty string under omitempty).
func withSpecField(t *testing.T, pool *shellv1alpha1.ShellPool, field string, value any) client.Object {
	t.Helper()
	pool.SetGroupVersionKind(shellv1alpha1.GroupVersion.WithKind("ShellPool"))
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := unstructured.SetNestedField(u.Object, value, "spec", field); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestStatusSubresource checks that spec and status have separate writers:
// an update of the object ignores status, and one of /status ignores spec.
func TestStatusSubresource(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	job := utiltesting.MakeShellJob("status", ns).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create: %v", err)
	}

	job.Status.Phase = shellv1alpha1.PhaseRunning
	if err := env.Client.Update(ctx, job); err != nil {
		t.Fatalf("update: %v", err)
	}
	if job.Status.Phase != "" {
		t.Errorf("an update of the object set status.phase to %q", job.Status.Phase)
	}

	job.Status.Phase = shellv1alpha1.PhaseSucceeded
	job.Status.ExitCode = ptr.To[int32](0)
	job.Spec.Stop = true
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatalf("update status: %v", err)
	}
	got := &shellv1alpha1.ShellJob{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != shellv1alpha1.PhaseSucceeded || got.Spec.Stop {
		t.Errorf("after a status update: phase %q, stop %v; want Succeeded, false", got.Status.Phase, got.Spec.Stop)
	}

	pool := utiltesting.MakeShellPool("status", ns).Replicas(2).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	pool.Status.ReadyReplicas = 2
	pool.Status.Ready = "2/2"
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatalf("update pool status: %v", err)
	}
}

// TestPrinterColumns runs kubectl, as a user would, against the API server.
func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	job := utiltesting.MakeShellJob("hello", ns).Command("echo hi").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	approved := utiltesting.MakeShellJob("approved", ns).Command("uptime").Approval(shellv1alpha1.ApprovalApproved, "bob").Obj()
	if err := env.Client.Create(ctx, approved); err != nil {
		t.Fatal(err)
	}
	job.Status = shellv1alpha1.ShellJobStatus{
		Number: 7, Summary: "echo hi", Phase: shellv1alpha1.PhaseSucceeded,
		ExitCode: ptr.To[int32](0), Pod: "shell-abc12-0", Ran: true,
	}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	approved.Status = shellv1alpha1.ShellJobStatus{Number: 8, Summary: "uptime", Phase: shellv1alpha1.PhaseQueued}
	if err := env.Client.Status().Update(ctx, approved); err != nil {
		t.Fatal(err)
	}
	pool := utiltesting.MakeShellPool("shell", ns).Replicas(4).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Status = shellv1alpha1.ShellPoolStatus{ReadyReplicas: 3, Ready: "3/4", BusyReplicas: 1, QueuedJobs: 2}
	if err := env.Client.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		args       []string
		wantHeader []string
		wantRow    []string
	}{
		"get sj": {
			args:       []string{"get", "sj", "hello"},
			wantHeader: []string{"NAME", "#", "POOL", "MODE", "PHASE", "EXIT", "OWNER", "APPROVER", "AGE", "COMMAND"},
			wantRow:    []string{"hello", "7", "shell", "Fork", "Succeeded", "0", "tester", "*", "echo", "hi"},
		},
		"get shelljobs -o wide": {
			args:       []string{"get", "shelljobs", "hello", "-o", "wide"},
			wantHeader: []string{"NAME", "#", "POOL", "MODE", "PHASE", "EXIT", "OWNER", "APPROVER", "AGE", "COMMAND", "POD"},
			wantRow:    []string{"hello", "7", "shell", "Fork", "Succeeded", "0", "tester", "*", "echo", "hi", "shell-abc12-0"},
		},
		"get sj of an approved job": {
			args:       []string{"get", "sj", "approved"},
			wantHeader: []string{"NAME", "#", "POOL", "MODE", "PHASE", "EXIT", "OWNER", "APPROVER", "AGE", "COMMAND"},
			wantRow:    []string{"approved", "8", "shell", "Fork", "Queued", "tester", "bob", "*", "uptime"},
		},
		"get sp": {
			args:       []string{"get", "sp"},
			wantHeader: []string{"NAME", "READY", "BUSY", "QUEUED", "AGE"},
			wantRow:    []string{"shell", "3/4", "1", "2", "*"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := kubectl(t, append(tc.args, "-n", ns)...)
			t.Logf("kubectl %s:\n%s", strings.Join(tc.args, " "), out)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				t.Fatalf("kubectl printed %d lines, want 2:\n%s", len(lines), out)
			}
			if diff := cmp.Diff(tc.wantHeader, strings.Fields(lines[0])); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			row := strings.Fields(lines[1])
			if len(row) != len(tc.wantRow) {
				t.Fatalf("row %q, want %q", row, tc.wantRow)
			}
			for i, want := range tc.wantRow {
				if want != "*" && row[i] != want {
					t.Errorf("column %d = %q, want %q (row %q)", i, row[i], want, lines[1])
				}
			}
		})
	}
}

// TestCategory: kubectl finds a job by its kind's singular, and lists
// both kinds by the category.
func TestCategory(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	if err := env.Client.Create(ctx, utiltesting.MakeShellJob("hello", ns).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, utiltesting.MakeShellPool("shell", ns).Obj()); err != nil {
		t.Fatal(err)
	}
	if out := kubectl(t, "get", "shelljob", "hello", "-n", ns, "-o", "name"); out != "shelljob.shell.shelljob.dev/hello\n" {
		t.Errorf("kubectl get shelljob hello printed %q", out)
	}
	want := "shelljob.shell.shelljob.dev/hello\nshellpool.shell.shelljob.dev/shell\n"
	if out := kubectl(t, "get", "shelljob-all", "-n", ns, "-o", "name"); out != want {
		t.Errorf("kubectl get shelljob-all printed %q, want %q", out, want)
	}
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(env.BinDir+"/kubectl", append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkErr fails t unless err matches wantErr: nil for "", or an Invalid
// error whose message contains wantErr.
func checkErr(t *testing.T, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantErr == "":
	case err == nil:
		t.Fatalf("no error, want one containing %q", wantErr)
	case !apierrors.IsInvalid(err):
		t.Fatalf("error %v is not Invalid", err)
	case !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error %q does not contain %q", err, wantErr)
	default:
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		t.Logf("refused as expected: %s", msg)
	}
}
