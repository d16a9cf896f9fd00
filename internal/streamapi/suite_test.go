package streamapi_test

import (
	"context"
	"io"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

var env *testenv.Env

func TestMain(m *testing.M) { clustertest.Main(m, &env) }

// testTimeout bounds each wait of a test.
const testTimeout = time.Minute

// Users of the tests. alice and bob may create ShellJobs and use their
// own through myshelljobs, as the chart's shelljob-user; reader may get
// every job's log and files through shelljobs, as shelljob-viewer.
// telegramID is a Kubernetes user named as a Telegram user id, with
// alice's and bob's rights.
const (
	alice      = "alice"
	bob        = "bob"
	reader     = "reader"
	telegramID = "1234567"
)

// caller is a user of the tests and the resource their requests go
// through.
type caller struct{ user, resource string }

// own is user through myshelljobs, which reaches their own jobs.
func own(user string) caller { return caller{user, streamv1alpha1.OwnResource} }

// anyJob is user through shelljobs, which reaches any job RBAC allows.
func anyJob(user string) caller { return caller{user, streamv1alpha1.Resource} }

// ownRights are the rights of a user who uses their own jobs, as the
// chart's shelljob-user has them.
var ownRights = []rbacv1.PolicyRule{
	{APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get", "list", "watch"}},
	{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/log", "myshelljobs/files"}, Verbs: []string{"get"}},
	{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/files"}, Verbs: []string{"create", "update"}},
	{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/attach"}, Verbs: []string{"create"}},
}

// params encodes the options into a request's query, as a client of the
// API does.
var params = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	if err := streamv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return runtime.NewParameterCodec(s)
}()

type fixture struct {
	t       *testing.T
	cluster *clustertest.Cluster
	replica *streamapitest.Replica
}

// setup runs a cluster and a replica of the stream API, and gives the
// test's users their rights.
func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, streamapitest.Options{})
}

// setupWith is setup with a replica of o.
func setupWith(t *testing.T, o streamapitest.Options) *fixture {
	t.Helper()
	return setupCluster(t, clustertest.Options{}, o)
}

// setupCluster is setupWith on a cluster of co, of two workers.
func setupCluster(t *testing.T, co clustertest.Options, o streamapitest.Options) *fixture {
	t.Helper()
	co.Workers = 2
	f := &fixture{t: t, cluster: clustertest.Start(t, env, co)}
	f.replica = streamapitest.Start(t, env, f.cluster, o)
	f.grant("shelljob-user", []string{alice, bob, telegramID}, ownRights...)
	f.grant("shelljob-reader", []string{reader}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"shelljobs/log", "shelljobs/files"}, Verbs: []string{"get"},
	})
	return f
}

// grant binds users to a Role of rules in the cluster's namespace.
func (f *fixture) grant(name string, users []string, rules ...rbacv1.PolicyRule) {
	f.t.Helper()
	streamapitest.Grant(f.t, env, f.cluster.Namespace, name, users, rules...)
}

// streamClient is a client of the stream API for one caller.
type streamClient struct {
	rest.Interface
	resource string
}

// as is a client of the stream API for c, authenticated by a client
// certificate.
func (f *fixture) as(c caller) streamClient {
	f.t.Helper()
	cfg := f.replica.Config(env.User(f.t, c.user))
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &streamv1alpha1.GroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return streamClient{rc, c.resource}
}

// request is a request for the job's subresource.
func (f *fixture) request(rc streamClient, verb, job, sub string) *rest.Request {
	return rc.Verb(verb).Namespace(f.cluster.Namespace).Resource(rc.resource).Name(job).SubResource(sub)
}

// log reads the job's log with opts to its end.
func (f *fixture) log(rc streamClient, job string, opts streamv1alpha1.ShellJobLogOptions) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	body, err := f.request(rc, "GET", job, streamv1alpha1.SubresourceLog).VersionedParams(&opts, params).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer body.Close()
	out, err := io.ReadAll(body)
	return string(out), err
}

// job creates a job that runs command, from user's CLI.
func (f *fixture) job(name, user, command string) *shellv1alpha1.ShellJob {
	f.t.Helper()
	return f.create(utiltesting.MakeShellJob(name, f.cluster.Namespace).Command(command).
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: user}).Obj())
}

func (f *fixture) create(sj *shellv1alpha1.ShellJob) *shellv1alpha1.ShellJob {
	f.t.Helper()
	if err := f.cluster.Client.Create(context.Background(), sj); err != nil {
		f.t.Fatalf("create job %s: %v", sj.Name, err)
	}
	return sj
}

// waitJob waits until the job satisfies cond, and returns it.
func (f *fixture) waitJob(name string, what string, cond func(*shellv1alpha1.ShellJob) bool) *shellv1alpha1.ShellJob {
	f.t.Helper()
	var last *shellv1alpha1.ShellJob
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(ctx context.Context) (bool, error) {
		sj, err := f.cluster.Job(ctx, name)
		if err != nil {
			return false, nil
		}
		last = sj
		return cond(sj), nil
	})
	if err != nil {
		f.t.Fatalf("job %s is not %s: %v; last status: %+v", name, what, err, last)
	}
	return last
}

// finished waits for the job's end.
func (f *fixture) finished(name string) *shellv1alpha1.ShellJob {
	f.t.Helper()
	return f.waitJob(name, "finished", shelljob.IsFinished)
}

// patch merges patch into the job.
func (f *fixture) patch(name, patch string) {
	f.t.Helper()
	sj := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: f.cluster.Namespace, Name: name}}
	if err := f.cluster.Client.Patch(context.Background(), sj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.t.Fatalf("patch job %s: %v", name, err)
	}
}
