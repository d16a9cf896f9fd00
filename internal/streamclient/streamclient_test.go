package streamclient_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
	"shelljob.dev/shelljob/internal/streamclient"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

var env *testenv.Env

func TestMain(m *testing.M) { clustertest.Main(m, &env) }

const (
	testTimeout = 2 * time.Minute
	// user owns the jobs of the tests.
	user = "alice"
)

type fixture struct {
	t       *testing.T
	cluster *clustertest.Cluster
	replica *streamapitest.Replica
}

func setup(t *testing.T, o streamapitest.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, cluster: clustertest.Start(t, env, clustertest.Options{Workers: 2})}
	f.replica = streamapitest.Start(t, env, f.cluster, o)
	streamapitest.Grant(t, env, f.cluster.Namespace, "shelljob-user", []string{user}, rbacv1.PolicyRule{
		APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get"},
	}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/log", "myshelljobs/files"}, Verbs: []string{"get"},
	}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/files", "myshelljobs/attach"}, Verbs: []string{"create", "update"},
	})
	return f
}

// client is a Client as user, with opts.
func (f *fixture) client(name string, opts streamclient.Options) *streamclient.Client {
	f.t.Helper()
	opts.Namespace = f.cluster.Namespace
	c, err := streamclient.New(f.replica.Config(env.User(f.t, name)), opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// job creates a job of user's that runs command.
func (f *fixture) job(name, command string, hold bool) {
	f.t.Helper()
	w := utiltesting.MakeShellJob(name, f.cluster.Namespace).Command(command).
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: user})
	if hold {
		w = w.Hold()
	}
	if err := f.cluster.Client.Create(context.Background(), w.Obj()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) waitJob(name string, cond func(*shellv1alpha1.ShellJob) bool) *shellv1alpha1.ShellJob {
	f.t.Helper()
	var sj *shellv1alpha1.ShellJob
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		sj, err = f.cluster.Job(ctx, name)
		return err == nil && cond(sj), nil
	})
	if err != nil {
		f.t.Fatalf("job %s: %v; last %+v", name, err, sj)
	}
	return sj
}

// resumes records the resumes of a client's follows.
type resumes struct {
	mu   sync.Mutex
	errs []error
}

func (r *resumes) record(_ string, _ int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *resumes) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// counted is a command whose output is lines "line 1" to "line n", one
// every interval, and the lines it writes.
func counted(n int, interval string) (string, string) {
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	return "for i in {1.." + strconv.Itoa(n) + "}; do echo line $i; sleep " + interval + "; done", want.String()
}

// TestFollowResumesAfterRestart checks that a follow cut by a restart of
// the replica that serves it resumes from its offset, with nothing lost
// and nothing twice.
func TestFollowResumesAfterRestart(t *testing.T) {
	f := setup(t, streamapitest.Options{})
	var r resumes
	c := f.client(user, streamclient.Options{Own: true, OnResume: r.record, Retry: 200 * time.Millisecond})
	command, want := counted(20, "0.2")
	f.job("counted", command, false)
	var out utiltesting.SyncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Follow(context.Background(), "counted", agentapi.AwaitStart, &out)
		done <- err
	}()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		return strings.Contains(out.String(), "line 3\n"), nil
	}); err != nil {
		t.Fatalf("no third line: %q", out.String())
	}
	f.replica.Restart()
	if err := <-done; err != nil {
		t.Fatalf("follow: %v", err)
	}
	if out.String() != want {
		t.Errorf("output across the restart = %q, want %q", out.String(), want)
	}
	if len(r.all()) == 0 {
		t.Error("the follow was not resumed: the restart did not cut it")
	}
	t.Logf("resumed after: %v", r.all())
}

// TestFollowIdle checks the idle cut: keepalives keep a silent command's
// follow open, and a follow whose stream moves nothing for the idle limit
// is cut and resumed, with nothing lost.
func TestFollowIdle(t *testing.T) {
	const command, want = "echo a; sleep 3; echo b", "a\nb\n"
	for name, tc := range map[string]struct {
		keepalive   time.Duration
		wantResumes bool
	}{
		"keepalives keep it open":  {keepalive: 200 * time.Millisecond},
		"silence cuts and resumes": {keepalive: agentapi.FollowKeepalive, wantResumes: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := setup(t, streamapitest.Options{Keepalive: tc.keepalive})
			var r resumes
			c := f.client(user, streamclient.Options{Own: true, StreamIdle: time.Second, Retry: 100 * time.Millisecond, OnResume: r.record})
			f.job("silent", command, false)
			var out bytes.Buffer
			reached, err := c.Follow(context.Background(), "silent", agentapi.AwaitStart, &out)
			if err != nil || out.String() != want || reached != int64(len(want)) {
				t.Fatalf("follow = %q to %d, %v; want %q", out.String(), reached, err, want)
			}
			got := r.all()
			if tc.wantResumes != (len(got) > 0) {
				t.Fatalf("resumes: %v", got)
			}
			for _, err := range got {
				if !errors.Is(err, agentapi.ErrStreamIdle) {
					t.Errorf("resumed after %v, want an idle cut", err)
				}
			}
		})
	}
}

// TestCalls checks the other calls and the refusals.
func TestCalls(t *testing.T) {
	f := setup(t, streamapitest.Options{})
	c := f.client(user, streamclient.Options{Own: true})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	f.job("files", `cat "$SHELLJOB_OUT"/in.txt; printf 'a\xffb\rX\n' > "$SHELLJOB_OUT"/out.txt; printf 'a\xffb\rX\n'`, true)
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	_ = tw.WriteHeader(&tar.Header{Name: "in.txt", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("in\n"))
	_ = tw.Close()
	if err := c.PutFiles(ctx, "files", &in); err != nil {
		t.Fatalf("put files: %v", err)
	}
	patch(t, f, "files", `{"spec":{"hold":false}}`)
	var text bytes.Buffer
	if err := c.FollowText(ctx, "files", agentapi.TextRendered, &text); err != nil || text.String() != "in\nX\\xffb\n" {
		t.Errorf("rendered text = %q, %v", text.String(), err)
	}
	f.waitJob("files", shelljob.IsFinished)
	var files bytes.Buffer
	if err := c.GetFiles(ctx, "files", &files); err != nil {
		t.Fatalf("get files: %v", err)
	}
	names := map[string]string{}
	tr := tar.NewReader(&files)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		b, _ := io.ReadAll(tr)
		names[h.Name] = string(b)
	}
	if names["in.txt"] != "in\n" || names["out.txt"] != "a\xffb\rX\n" {
		t.Errorf("files = %q", names)
	}

	start := time.Now()
	if _, err := c.Follow(ctx, "none", 0, io.Discard); !apierrors.IsNotFound(err) {
		t.Errorf("follow of a job that is not there, as a user: %v, want NotFound", err)
	}
	// The owner through shelljobs, which reads any job: not theirs to use.
	if _, err := f.client(user, streamclient.Options{}).Follow(ctx, "files", 0, io.Discard); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"shelljobs/log"`) {
		t.Errorf("follow through shelljobs as a user: %v, want Forbidden", err)
	}
	streamapitest.Grant(t, env, f.cluster.Namespace, "reader", []string{"reader"}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"shelljobs/log"}, Verbs: []string{"get"},
	})
	if _, err := f.client("reader", streamclient.Options{}).Follow(ctx, "none", 0, io.Discard); !apierrors.IsNotFound(err) {
		t.Errorf("follow of a job that is not there, as a reader: %v, want NotFound", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("refusals took %v: were they retried?", d)
	}
	if err := f.cluster.LoseWorker(ctx, "files"); err != nil {
		t.Fatal(err)
	}
	var lost error
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		_, lost = c.Follow(ctx, "files", 0, io.Discard)
		return lost != nil, nil
	})
	if !errors.Is(lost, streamclient.ErrOutputLost) {
		t.Errorf("follow of a job whose worker is gone: %v, want ErrOutputLost", lost)
	}
	t.Log(lost)
}

// TestAttach checks that Attach reaches the agent's attach of the job,
// and gives back its stderr and exit status (the agent of this tree knows
// no attach: its usage error).
func TestAttach(t *testing.T) {
	f := setup(t, streamapitest.Options{})
	kubelet := streamapitest.StartKubelet(t, env, f.cluster)
	c := f.client(user, streamclient.Options{Own: true})
	f.job("console", "sleep 300", false)
	sj := f.waitJob("console", shelljob.IsStarted)
	kubelet.Bind(types.NamespacedName{Namespace: sj.Status.PodNamespace, Name: sj.Status.Pod})
	var out, errOut bytes.Buffer
	err := c.Attach(context.Background(), "console", remotecommand.StreamOptions{Stdin: strings.NewReader("exit\n"), Stdout: &out, Stderr: &errOut})
	execs := kubelet.Execs()
	if len(execs) != 1 {
		t.Fatalf("attach: %v; %d execs", err, len(execs))
	}
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != execs[0].ExitCode || errOut.String() != execs[0].Stderr {
		t.Errorf("attach: %v, stderr %q; want the agent's exit %d and stderr %q", err, errOut.String(), execs[0].ExitCode, execs[0].Stderr)
	}
}

func patch(t *testing.T, f *fixture, name, p string) {
	t.Helper()
	sj := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: f.cluster.Namespace, Name: name}}
	if err := f.cluster.Client.Patch(context.Background(), sj, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		t.Fatal(err)
	}
}

// gate passes writes on to w until after bytes, then blocks the next
// write until open closes, once; reached closes when it blocks.
type gate struct {
	w       io.Writer
	after   int64
	n       int64
	reached chan struct{}
	open    chan struct{}
}

func (g *gate) Write(p []byte) (int, error) {
	if g.n >= g.after && g.reached != nil {
		close(g.reached)
		g.reached = nil
		<-g.open
	}
	n, err := g.w.Write(p)
	g.n += int64(n)
	return n, err
}

// TestFilesResumeAfterCut checks that a files download cut half way (here
// by a restart of the replica that serves it, as the API server's request
// timeout cuts one) goes on from the offset it reached: the tar stream is
// whole, nothing lost and nothing twice.
func TestFilesResumeAfterCut(t *testing.T) {
	f := setup(t, streamapitest.Options{})
	var r resumes
	c := f.client(user, streamclient.Options{Own: true, OnResume: r.record, Retry: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f.job("many", `seq 1 1000000 > "$SHELLJOB_OUT"/seq.txt; seq 1 1000 > "$SHELLJOB_OUT"/small.txt`, false)
	f.waitJob("many", shelljob.IsFinished)
	var whole bytes.Buffer
	if err := c.GetFiles(ctx, "many", &whole); err != nil {
		t.Fatalf("get files in one go: %v", err)
	}
	if got := r.all(); len(got) != 0 {
		t.Fatalf("the first download was resumed: %v", got)
	}

	var cut bytes.Buffer
	g := &gate{w: &cut, after: 1 << 20, reached: make(chan struct{}), open: make(chan struct{})}
	reached := g.reached
	done := make(chan error, 1)
	go func() { done <- c.GetFiles(ctx, "many", g) }()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("the download ended before its first MiB: %v", err)
	}
	f.replica.Restart()
	close(g.open)
	if err := <-done; err != nil {
		t.Fatalf("get files across a restart: %v", err)
	}
	if !bytes.Equal(cut.Bytes(), whole.Bytes()) {
		t.Errorf("files across a restart: %d bytes that differ from the %d of one go", cut.Len(), whole.Len())
	}
	got := r.all()
	if len(got) == 0 {
		t.Fatal("the download was not resumed: the restart did not cut it")
	}
	t.Logf("resumed after: %v", got)
}
