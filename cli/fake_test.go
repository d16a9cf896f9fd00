package cli

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

const testNS = "shell"

// fakeStream answers Follow with Output, GetFiles with Files and Attach
// with Console, and counts the GetFiles calls.
type fakeStream struct {
	Output string
	Files  map[string][]byte
	// Uncounted plays an older agent: the job's status counts no files.
	Uncounted bool
	// FollowErr and GetFilesErr, if not nil, end each follow and each
	// GetFiles, after what they wrote.
	FollowErr, GetFilesErr error
	// Console, if not nil, answers Attach.
	Console *fakeConsole
	// Exit, if not nil, comes after the output to a follow that asks for
	// it, as the stream API's exit frame.
	Exit *agentapi.Event
	// Unended plays an operator that never records the jobs' end.
	Unended bool
	// Marks plays a stream API that marks the jobs delivered (Delivers).
	Marks bool

	getFiles atomic.Int32
}

var _ Stream = (*fakeStream)(nil)

// counted is the status of the job's files, as the operator records what
// the agent counted.
func (a *fakeStream) counted() *shellv1alpha1.ShellJobFiles {
	if a.Uncounted {
		return nil
	}
	n := &shellv1alpha1.ShellJobFiles{Count: int64(len(a.Files))}
	for _, data := range a.Files {
		n.Bytes += int64(len(data))
	}
	return n
}

func (a *fakeStream) Follow(_ context.Context, _ string, offset int64, w io.Writer) (int64, error) {
	_, err := io.WriteString(w, a.Output[max(offset, 0):])
	if x, ok := w.(agentapi.ExitSink); ok && err == nil && a.FollowErr == nil && a.Exit != nil {
		err = x.Exit(*a.Exit)
	}
	return int64(len(a.Output)), cmp.Or(err, a.FollowErr)
}

func (a *fakeStream) Delivers() bool { return a.Marks }

func (a *fakeStream) GetFiles(_ context.Context, _ string, w io.Writer) error {
	a.getFiles.Add(1)
	tw := tar.NewWriter(w)
	// In name order, as the agent walks the directory.
	for _, name := range slices.Sorted(maps.Keys(a.Files)) {
		data := a.Files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return cmp.Or(a.GetFilesErr, tw.Close())
}

func (a *fakeStream) Attach(ctx context.Context, job string, opts remotecommand.StreamOptions) error {
	if a.Console == nil {
		return errors.New("the fake has no console")
	}
	return a.Console.Attach(ctx, job, opts)
}

// fakeCluster is a Cluster on controller-runtime's fake client, with an
// "operator" that ends every job with exit code 0 at once, and the files
// stream counted.
func fakeCluster(t *testing.T, stream *fakeStream) *Cluster {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = shellv1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&shellv1alpha1.ShellJob{}).Build()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			endJobs(ctx, c, stream)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &Cluster{
		Jobs:      &fakeJobs{c: c, ns: testNS},
		Pools:     fakePools{c: c, ns: testNS},
		Namespace: testNS,
		Stream:    stream,
		AnyStream: stream,
		WhoAmI:    func(context.Context) (string, error) { return "alice", nil },
	}
}

// endJobs ends each job, and touches the ended ones and the running
// consoles so that a watch that started late still sees them: the fake
// client's watch, unlike the API server's, does not replay what came
// after the resourceVersion it starts from. A console runs until it is
// stopped, as only its attach would end it.
func endJobs(ctx context.Context, c client.Client, stream *fakeStream) {
	var list shellv1alpha1.ShellJobList
	if err := c.List(ctx, &list); err != nil {
		return
	}
	for i := range list.Items {
		j := &list.Items[i]
		if j.Spec.Mode == shellv1alpha1.ModeConsole && !j.Spec.Stop {
			if j.Status.Pod == "" {
				j.Status.Ran, j.Status.Pod, j.Status.Phase, j.Status.Number = true, "w-0", shellv1alpha1.PhaseRunning, int64(i+1)
			} else {
				j.Status.OutputBytes++
			}
			_ = c.Status().Update(ctx, j)
			continue
		}
		if stream.Unended {
			continue
		}
		if !shelljob.IsFinished(j) {
			zero := int32(0)
			j.Status.Ran, j.Status.Pod, j.Status.Phase, j.Status.ExitCode = true, "w-0", shellv1alpha1.PhaseSucceeded, &zero
			j.Status.Files = stream.counted()
			j.Status.Number = int64(i + 1)
			shelljob.SetFinishedCondition(j, time.Now(), shellv1alpha1.ShellJobFinishedReasonExited, "")
		} else {
			j.Status.OutputBytes++
		}
		_ = c.Status().Update(ctx, j)
	}
}

func jobs(t *testing.T, c *Cluster) []shellv1alpha1.ShellJob {
	t.Helper()
	list, err := c.Jobs.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// testCmd runs the root command on in with cluster and returns stdout,
// stderr and the exit code.
func testCmd(t *testing.T, cluster *Cluster, in io.Reader, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCmd(Options{
		IOStreams:  genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut},
		Cluster:    func() (*Cluster, error) { return cluster, nil },
		Interrupts: func() (<-chan os.Signal, func()) { return make(chan os.Signal), func() {} },
	})
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd.SetContext(ctx)
	code := Main(cmd, &errOut)
	return out.String(), errOut.String(), code
}

// fakePools is the Cluster's PoolClient on controller-runtime's fake
// client.
type fakePools struct {
	c  client.Client
	ns string
}

func (f fakePools) Get(ctx context.Context, name string, _ metav1.GetOptions) (*shellv1alpha1.ShellPool, error) {
	var pool shellv1alpha1.ShellPool
	return &pool, f.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, &pool)
}

func (f fakePools) List(ctx context.Context, _ metav1.ListOptions) (*shellv1alpha1.ShellPoolList, error) {
	var list shellv1alpha1.ShellPoolList
	return &list, f.c.List(ctx, &list, client.InNamespace(f.ns))
}

// fakeJobs is the Cluster's JobClient on controller-runtime's fake client.
type fakeJobs struct {
	c  client.WithWatch
	ns string
	// requireUser refuses a job from the CLI that names no user, as a
	// cluster with the origin policy and no origin-user policy does.
	requireUser bool
	// beforeCreate, if not nil, runs at the start of each create.
	beforeCreate func()
	created      atomic.Int64
	// patchErr, if not nil, fails each patch.
	patchErr error
}

func (f *fakeJobs) Create(ctx context.Context, job *shellv1alpha1.ShellJob, _ metav1.CreateOptions) (*shellv1alpha1.ShellJob, error) {
	if f.beforeCreate != nil {
		f.beforeCreate()
	}
	if f.requireUser && job.Spec.Origin.User == "" {
		return nil, apierrors.NewForbidden(shellv1alpha1.GroupVersion.WithResource("shelljobs").GroupResource(), "",
			errors.New("spec.origin.user of a job from the CLI must be the user who creates it, alice"))
	}
	job = job.DeepCopy()
	// As the API server does; controller-runtime's fake client does not.
	job.UID = types.UID(fmt.Sprintf("uid-%d", f.created.Add(1)))
	return job, f.c.Create(ctx, job)
}

func (f *fakeJobs) Get(ctx context.Context, name string, _ metav1.GetOptions) (*shellv1alpha1.ShellJob, error) {
	var job shellv1alpha1.ShellJob
	return &job, f.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, &job)
}

func (f *fakeJobs) List(ctx context.Context, opts metav1.ListOptions) (*shellv1alpha1.ShellJobList, error) {
	var list shellv1alpha1.ShellJobList
	return &list, f.c.List(ctx, &list, f.listOptions(opts))
}

func (f *fakeJobs) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f.c.Watch(ctx, &shellv1alpha1.ShellJobList{}, f.listOptions(opts))
}

func (f *fakeJobs) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*shellv1alpha1.ShellJob, error) {
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	job := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
	return job, f.c.Patch(ctx, job, client.RawPatch(pt, data))
}

// listOptions turns a request's options into the fake client's, which
// reads the parsed selectors.
func (f *fakeJobs) listOptions(opts metav1.ListOptions) *client.ListOptions {
	o := &client.ListOptions{Namespace: f.ns, Raw: &opts}
	if opts.FieldSelector != "" {
		o.FieldSelector = fields.ParseSelectorOrDie(opts.FieldSelector)
	}
	return o
}
