package kubetest

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
)

// consoleCluster is a cluster whose workers are bound to a stand-in
// kubelet (streamapitest.Kubelet), so that the stream API's attach reaches
// them through the API server's pods/exec, as in a cluster.
func consoleCluster(t *testing.T, workers int32) *clustertest.Cluster {
	t.Helper()
	cl := clustertest.Start(t, env, clustertest.Options{Workers: workers})
	kubelet := streamapitest.StartKubelet(t, env, cl)
	var pods corev1.PodList
	if err := cl.Client.List(context.Background(), &pods, client.InNamespace(cl.Namespace), client.MatchingLabels{shellv1alpha1.LabelPool: cl.Pool}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		kubelet.Bind(client.ObjectKeyFromObject(&p))
	}
	return cl
}

// consoleJobs lists the Console jobs of cl's namespace.
func consoleJobs(ctx context.Context, t *testing.T, cl *clustertest.Cluster) []shellv1alpha1.ShellJob {
	t.Helper()
	var list shellv1alpha1.ShellJobList
	if err := cl.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []shellv1alpha1.ShellJob
	for _, j := range list.Items {
		if j.Spec.Mode == shellv1alpha1.ModeConsole {
			out = append(out, j)
		}
	}
	return out
}

// waitEnded waits until job name has ended, and returns it.
func waitEnded(ctx context.Context, t *testing.T, cl *clustertest.Cluster, name string) *shellv1alpha1.ShellJob {
	t.Helper()
	for {
		j, err := cl.Job(ctx, name)
		if err == nil && shelljob.IsFinished(j) {
			return j
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never ended: %+v, %v", name, j, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The console is a job: with a piped input, what it types runs in the
// pool's shell on a worker, as a user of its own and not root, its exit
// status is the command's, and the job is numbered, listed, ended with
// that status and marked delivered, with the session in its output.
func TestConsoleIsAJob(t *testing.T) {
	cl := consoleCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The input stays open until the shell has ended: its end would send
	// exit and close the session half a second later, whatever the shell
	// does with it.
	in, typing := io.Pipe()
	defer typing.Close()
	go func() { _, _ = io.WriteString(typing, "print -r -- answer=$((6*7)) uid=$(id -u)\nexit 3\n") }()
	out, errOut, code := pluginOnInput(ctx, t, cl, "erin", in, "console", "--pool", cl.Pool)
	m := regexp.MustCompile(`(?m)^answer=42 uid=(\d+)\r?$`).FindStringSubmatch(out)
	if code != 3 || m == nil {
		t.Fatalf("console: exit %d, stdout %q, stderr %q; want 3 and the answer", code, out, errOut)
	}
	if uid, _ := strconv.Atoi(m[1]); uid == 0 {
		t.Errorf("the console's shell runs as root")
	}
	js := consoleJobs(ctx, t, cl)
	if len(js) != 1 {
		t.Fatalf("%d console jobs, want 1", len(js))
	}
	j := waitEnded(ctx, t, cl, js[0].Name)
	if j.Status.Number == 0 || j.Spec.Origin.Source != shellv1alpha1.OriginCLI || shelljob.Phase(j) != shellv1alpha1.PhaseFailed ||
		j.Status.ExitCode == nil || *j.Status.ExitCode != 3 {
		t.Errorf("the console's job: %+v", j.Status)
	}
	if _, ok := shelljob.Delivered(j); !ok {
		t.Errorf("the console's job is not marked delivered: %v", j.Annotations)
	}
	if ls, _, _ := pluginOn(ctx, t, cl, "erin", "ls", "--all"); !strings.Contains(ls, j.Name) || !strings.Contains(ls, "exec zsh -l") {
		t.Errorf("ls --all does not list the console:\n%s", ls)
	}
	if logs, errOut, code := pluginOn(ctx, t, cl, "erin", "logs", j.Name); code != 0 || !strings.Contains(logs, "answer=42") {
		t.Errorf("logs of the console: exit %d, %q, %q", code, logs, errOut)
	}
}

// A console is stopped as any job is: its shell gets the stop ladder, and
// the console ends with its status.
func TestConsoleStopped(t *testing.T) {
	cl := consoleCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, typing := io.Pipe()
	defer typing.Close()
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := pluginOnInput(ctx, t, cl, "erin", in, "console", "--pool", cl.Pool)
		done <- result{out, errOut, code}
	}()
	var j shellv1alpha1.ShellJob
	for {
		if js := consoleJobs(ctx, t, cl); len(js) == 1 && shelljob.Phase(&js[0]) == shellv1alpha1.PhaseRunning {
			j = js[0]
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the console never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := io.WriteString(typing, "sleep 100\n"); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "stop", strconv.FormatInt(j.Status.Number, 10)); code != 0 {
		t.Fatalf("stop: exit %d, %q, %q", code, out, errOut)
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the console did not end with its stop")
	}
	ended := waitEnded(ctx, t, cl, j.Name)
	if shelljob.Phase(ended) != shellv1alpha1.PhaseStopped || ended.Status.ExitCode == nil || int(*ended.Status.ExitCode) != r.code || r.code == 0 {
		t.Errorf("stopped console: exit %d (%q), job %+v", r.code, r.errOut, ended.Status)
	}
}
