package streamapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// tarOf is a tar stream of files, name to content.
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// filesIn reads a tar stream's regular files, name to content.
func filesIn(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("tar stream: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

func (f *fixture) putFiles(user caller, job, method string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return f.request(f.as(user), method, job, streamv1alpha1.SubresourceFiles).Body(data).Do(ctx).Error()
}

func (f *fixture) getFiles(user caller, job string) ([]byte, error) {
	return f.getFilesFrom(user, job, 0)
}

// getFilesFrom gets the job's files from offset of their tar stream.
func (f *fixture) getFilesFrom(user caller, job string, offset int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return f.request(f.as(user), "GET", job, streamv1alpha1.SubresourceFiles).
		VersionedParams(&streamv1alpha1.ShellJobFilesOptions{Offset: offset}, params).DoRaw(ctx)
}

// TestFiles puts a held job's input files and gets what it left, as its
// owner and as a reader.
func TestFiles(t *testing.T) {
	f := setup(t)
	held := func(name string) {
		f.create(utiltesting.MakeShellJob(name, f.cluster.Namespace).Hold().
			Command(`cat "$SHELLJOB_OUT"/notes.txt; echo done > "$SHELLJOB_OUT"/result.txt`).
			Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Obj())
	}
	held("inputs")
	if err := f.putFiles(anyJob(reader), "inputs", "PUT", tarOf(t, map[string]string{"notes.txt": "x"})); !apierrors.IsForbidden(err) {
		t.Errorf("put by a reader, who may only get: %v, want Forbidden", err)
	}
	if err := f.putFiles(own(bob), "inputs", "PUT", tarOf(t, map[string]string{"notes.txt": "planted"})); !apierrors.IsForbidden(err) {
		t.Errorf("put by another user into alice's held job: %v, want Forbidden", err)
	}
	if err := f.putFiles(own(alice), "inputs", "PUT", tarOf(t, map[string]string{"notes.txt": "my notes\n"})); err != nil {
		t.Fatalf("put by the owner: %v", err)
	}
	f.patch("inputs", `{"spec":{"hold":false}}`)
	f.finished("inputs")
	if got, err := f.log(f.as(own(alice)), "inputs", streamv1alpha1.ShellJobLogOptions{}); err != nil || got != "my notes\n" {
		t.Errorf("the job saw %q, %v; want the notes put in", got, err)
	}
	for _, user := range []caller{own(alice), anyJob(reader)} {
		data, err := f.getFiles(user, "inputs")
		if err != nil {
			t.Fatalf("get files as %s: %v", user, err)
		}
		if got := filesIn(t, data); got["notes.txt"] != "my notes\n" || got["result.txt"] != "done\n" || len(got) != 2 {
			t.Errorf("files as %s = %v, want the notes and the result", user, got)
		}
	}
	if _, err := f.getFiles(own(bob), "inputs"); !apierrors.IsForbidden(err) {
		t.Errorf("get files by another user: %v, want Forbidden", err)
	}
	// The job ended: its tar stream from an offset is the same stream's
	// rest.
	whole, err := f.getFiles(own(alice), "inputs")
	if err != nil {
		t.Fatal(err)
	}
	for _, offset := range []int64{1, 512, int64(len(whole)) - 1, int64(len(whole))} {
		if rest, err := f.getFilesFrom(own(alice), "inputs", offset); err != nil || !bytes.Equal(rest, whole[offset:]) {
			t.Errorf("files from offset %d: %d bytes, %v; want the stream's last %d", offset, len(rest), err, int64(len(whole))-offset)
		}
	}
	if _, err := f.getFilesFrom(own(alice), "inputs", -1); !apierrors.IsBadRequest(err) {
		t.Errorf("files from offset -1: %v, want BadRequest", err)
	}
	if err := f.request(f.as(own(alice)), "PUT", "inputs", streamv1alpha1.SubresourceFiles).
		VersionedParams(&streamv1alpha1.ShellJobFilesOptions{Offset: 3}, params).Body(tarOf(t, nil)).Do(context.Background()).Error(); !apierrors.IsBadRequest(err) {
		t.Errorf("a put with an offset: %v, want BadRequest", err)
	}
	if err := f.putFiles(own(alice), "inputs", "POST", tarOf(t, map[string]string{"late.txt": "x"})); !apierrors.IsConflict(err) {
		t.Errorf("put into a job that ran: %v, want Conflict", err)
	}

	held("posted")
	if err := f.putFiles(own(alice), "posted", "POST", tarOf(t, map[string]string{"notes.txt": "posted\n"})); err != nil {
		t.Fatalf("post by the owner: %v", err)
	}
	f.patch("posted", `{"spec":{"hold":false}}`)
	f.finished("posted")
	if got, err := f.log(f.as(own(alice)), "posted", streamv1alpha1.ShellJobLogOptions{}); err != nil || got != "posted\n" {
		t.Errorf("the job saw %q, %v; want the notes posted", got, err)
	}

	f.job("free", alice, "sleep 300")
	if err := f.putFiles(own(alice), "free", "PUT", tarOf(t, map[string]string{"notes.txt": "x"})); !apierrors.IsConflict(err) {
		t.Errorf("put into a job that is not held: %v, want Conflict", err)
	}
	f.create(utiltesting.MakeShellJob("queued", f.cluster.Namespace).Pool("none").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Obj())
	if _, err := f.getFiles(own(alice), "queued"); !apierrors.IsBadRequest(err) {
		t.Errorf("get files of a job that has not started: %v, want BadRequest", err)
	}
	if sj := f.waitJob("free", "started", shelljob.IsStarted); !sj.Status.Ran {
		t.Fatal("not started")
	}
	if _, err := f.getFilesFrom(own(alice), "free", 1); !apierrors.IsBadRequest(err) {
		t.Errorf("files of a running job from an offset: %v, want BadRequest", err)
	}
}

// TestFilesBeforeTheStartIsRecorded: a reader who followed a job's output
// to its end, as exec does, and asks for its files before the operator
// recorded the start gets them once the record comes, not "has not
// started".
func TestFilesBeforeTheStartIsRecorded(t *testing.T) {
	var hold clustertest.StartHold
	f := setupCluster(t, clustertest.Options{OperatorClient: hold.Layer}, streamapitest.Options{})
	released := hold.On()
	defer released()

	f.job("late", alice, `echo kept > "$SHELLJOB_OUT"/a.txt; echo out`)
	if got, err := f.log(f.as(own(alice)), "late", streamv1alpha1.ShellJobLogOptions{Follow: true, AwaitStart: true}); err != nil || got != "out\n" {
		t.Fatalf("the output followed to its end: %q, %v", got, err)
	}
	if sj, err := f.cluster.Job(context.Background(), "late"); err != nil || shelljob.IsStarted(sj) {
		t.Fatalf("the start is recorded (%v) while its write is held", err)
	}
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		data, err := f.getFiles(own(alice), "late")
		got <- result{data, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("files before the start's record: %d bytes, %v; want them after it", len(r.data), r.err)
	case <-time.After(time.Second):
	}
	released()
	r := <-got
	if r.err != nil {
		t.Fatalf("files once the start is recorded: %v", r.err)
	}
	if files := filesIn(t, r.data); files["a.txt"] != "kept\n" || len(files) != 1 {
		t.Errorf("files = %v, want a.txt", files)
	}
}

// olderAgent plays an agent older than get-files --offset: it refuses an
// offset past 0 as such an agent's usage error.
type olderAgent struct{ agentapi.Client }

func (a olderAgent) GetFiles(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) error {
	if offset != 0 {
		return fmt.Errorf("get files of %s in %s: flag provided but not defined: -offset: %w", job, pod, agentapi.ErrUsage)
	}
	return a.Client.GetFiles(ctx, pod, job, 0, w)
}

// TestFilesOfAnOlderAgent: the files of a job whose agent takes no offset
// are still read from one: the server reads them from 0 and drops what
// comes before it.
func TestFilesOfAnOlderAgent(t *testing.T) {
	f := setupWith(t, streamapitest.Options{Agent: func(a agentapi.Client) agentapi.Client { return olderAgent{a} }})
	f.job("older", alice, `seq 1 2000 > "$SHELLJOB_OUT"/seq.txt`)
	f.finished("older")
	whole, err := f.getFiles(own(alice), "older")
	if err != nil {
		t.Fatal(err)
	}
	if got := filesIn(t, whole); len(got["seq.txt"]) != len(seqText(2000)) {
		t.Fatalf("files %d bytes, seq.txt of %d", len(whole), len(got["seq.txt"]))
	}
	for _, offset := range []int64{1, 700, int64(len(whole))} {
		if rest, err := f.getFilesFrom(own(alice), "older", offset); err != nil || !bytes.Equal(rest, whole[offset:]) {
			t.Errorf("files from offset %d: %d bytes, %v; want the stream's last %d", offset, len(rest), err, int64(len(whole))-offset)
		}
	}
}

// seqText is what seq 1 n writes.
func seqText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintln(&b, i)
	}
	return b.String()
}
