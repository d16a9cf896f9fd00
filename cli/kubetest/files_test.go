package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/cli"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamclient"
)

// pluginOn runs kubectl-shelljob as user in cl's namespace: the real
// commands and clients on the envtest kubeconfig, the stream API's
// reached through cl's front, in place of the API server's aggregation
// layer, which envtest does not have.
func pluginOn(ctx context.Context, t *testing.T, cl *clustertest.Cluster, user string, args ...string) (string, string, int) {
	t.Helper()
	return pluginOnInput(ctx, t, cl, user, strings.NewReader(""), args...)
}

// pluginOnInput is pluginOn with in for its standard input.
func pluginOnInput(ctx context.Context, t *testing.T, cl *clustertest.Cluster, user string, in io.Reader, args ...string) (string, string, int) {
	t.Helper()
	originPolicy(ctx, t, cl.Namespace)
	flags := genericclioptions.NewConfigFlags(true)
	kubeconfig, ns, cacheDir := env.Kubeconfig, cl.Namespace, t.TempDir()
	groups := []string{"system:masters"}
	flags.KubeConfig, flags.Namespace, flags.Impersonate, flags.ImpersonateGroup, flags.CacheDir = &kubeconfig, &ns, &user, &groups, &cacheDir
	real := cli.NewClusterGetter(flags)
	// The front is no API server: it takes no impersonation, so the
	// stream API meets user by a client certificate of their own, in the
	// groups the flags impersonate, as the aggregation layer would pass
	// the impersonated user on.
	streamConfig := cl.Stream.Config(env.User(t, user, groups...))
	var out, errOut bytes.Buffer
	cmd := cli.NewCmd(cli.Options{
		IOStreams: genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut},
		Cluster: func() (*cli.Cluster, error) {
			c, err := real()
			if err != nil {
				return nil, err
			}
			if c.Stream, err = streamclient.New(streamConfig, streamclient.Options{Namespace: c.Namespace, Own: true, Deliver: true}); err != nil {
				return nil, err
			}
			c.AnyStream, err = streamclient.New(streamConfig, streamclient.Options{Namespace: c.Namespace})
			return c, err
		},
		Interrupts: func() (<-chan os.Signal, func()) { return make(chan os.Signal), func() {} },
	})
	cmd.SetArgs(args)
	cmd.SetContext(ctx)
	code := cli.Main(cmd, &errOut)
	return out.String(), errOut.String(), code
}

// exec streams the files a command leaves in $SHELLJOB_OUT to disk within
// the bot's caps, warns of those left out, and marks the job delivered
// once its output and files are in; a job without files is marked as its
// output ends.
func TestExecFilesAndDeliveredMark(t *testing.T) {
	cl := clustertest.Start(t, env, clustertest.Options{Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "out")
	// In name order: a/deep/n.txt, big.bin (50 MiB and a byte, sparse),
	// then f101.txt to f220.txt, of which the first 99 fill the count.
	command := `cd "$SHELLJOB_OUT"; mkdir -p a/deep; echo nested > a/deep/n.txt; truncate -s $((50*1024*1024+1)) big.bin; ` +
		`for i in {101..220}; do echo $i > f$i.txt; done; echo done`
	out, errOut, code := pluginOn(ctx, t, cl, "erin", "exec", "--pool", cl.Pool, "--output-dir", dir, "--", command)
	if code != 0 || out != "done\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var saved []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			saved = append(saved, filepath.ToSlash(rel))
		}
		return err
	})
	if len(saved) != 100 || saved[0] != "a/deep/n.txt" || strings.Contains(strings.Join(saved, " "), "f200.txt") {
		t.Errorf("%d files saved: %q", len(saved), saved)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f199.txt")); err != nil || string(b) != "199\n" {
		t.Errorf("f199.txt: %q, %v", b, err)
	}
	for _, want := range []string{
		"saved " + filepath.Join(dir, "a", "deep", "n.txt") + "\n",
		"warning: files: not saved: big.bin (50.0 MB, over the 50.0 MB limit for one file)\n",
		"warning: files: 21 more not saved: a command saves at most 100\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if n := strings.Count(errOut, "saved "+dir); n != 100 {
		t.Errorf("%d files named saved", n)
	}
	// marked is whether the job of what is marked delivered.
	marked := func(what string) (bool, string) {
		t.Helper()
		return markedDelivered(ctx, t, cl, what)
	}
	// exec marks a job that left files once it saved them.
	if ok, job := marked("f$i.txt"); !ok {
		t.Errorf("not marked delivered: %s", job)
	}

	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "exec", "--pool", cl.Pool, "--", "echo", "no files"); code != 0 || out != "no files\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The stream API marks one that left none, once it sent the output's
	// end.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ok, _ := marked("no files")
		return ok, nil
	}); err != nil {
		_, job := marked("no files")
		t.Errorf("not marked delivered: %s", job)
	}
}

// jobWith is the job of cl whose command holds what, or nil.
func jobWith(ctx context.Context, t *testing.T, cl *clustertest.Cluster, what string) *shellv1alpha1.ShellJob {
	t.Helper()
	var list shellv1alpha1.ShellJobList
	if err := cl.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if strings.Contains(list.Items[i].Spec.Command, what) {
			return &list.Items[i]
		}
	}
	return nil
}

// markedDelivered is whether the job whose command holds what is marked
// delivered, and what it is.
func markedDelivered(ctx context.Context, t *testing.T, cl *clustertest.Cluster, what string) (bool, string) {
	t.Helper()
	j := jobWith(ctx, t, cl, what)
	if j == nil {
		return false, "no job of " + what
	}
	_, ok := shelljob.Delivered(j)
	return ok, fmt.Sprintf("job %s (%q): %v", j.Name, what, j.Annotations)
}

// TestExecAheadOfTheStartsRecord: exec reads its job's output to the end,
// with the exit, before the operator records the start (held here): it
// still saves the files and marks the job delivered, and a logs right
// after an exec prints the output rather than "has not started".
func TestExecAheadOfTheStartsRecord(t *testing.T) {
	var hold clustertest.StartHold
	cl := clustertest.Start(t, env, clustertest.Options{Workers: 2, OperatorClient: hold.Layer})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	release := hold.On()
	defer release()
	time.AfterFunc(2*time.Second, release)
	dir := t.TempDir()
	out, errOut, code := pluginOn(ctx, t, cl, "erin", "exec", "--pool", cl.Pool, "--output-dir", dir, "--", `echo kept > "$SHELLJOB_OUT"/a.txt; echo one`)
	if code != 0 || out != "one\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the file out: %q, %v; exec said %q", b, err, errOut)
	}
	if ok, job := markedDelivered(ctx, t, cl, "echo one"); !ok {
		t.Errorf("not marked delivered: %s", job)
	}

	release = hold.On()
	defer release()
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "exec", "--pool", cl.Pool, "--", "echo two"); code != 0 || out != "two\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	j := jobWith(ctx, t, cl, "echo two")
	if j == nil || shelljob.IsStarted(j) {
		t.Fatalf("the job of the second exec, its start's record held: %+v", j)
	}
	time.AfterFunc(time.Second, release)
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "logs", j.Name); code != 0 || out != "two\n" {
		t.Errorf("logs right after exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
