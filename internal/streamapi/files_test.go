package streamapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
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

func (f *fixture) putFiles(user, job, method string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return f.request(f.as(user), method, job, streamv1alpha1.SubresourceFiles).Body(data).Do(ctx).Error()
}

func (f *fixture) getFiles(user, job string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return f.request(f.as(user), "GET", job, streamv1alpha1.SubresourceFiles).DoRaw(ctx)
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
	if err := f.putFiles(reader, "inputs", "PUT", tarOf(t, map[string]string{"notes.txt": "x"})); !apierrors.IsForbidden(err) {
		t.Errorf("put by a reader, who may only get: %v, want Forbidden", err)
	}
	if err := f.putFiles(alice, "inputs", "PUT", tarOf(t, map[string]string{"notes.txt": "my notes\n"})); err != nil {
		t.Fatalf("put by the owner: %v", err)
	}
	f.patch("inputs", `{"spec":{"hold":false}}`)
	f.finished("inputs")
	if got, err := f.log(f.as(alice), "inputs", streamv1alpha1.ShellJobLogOptions{}); err != nil || got != "my notes\n" {
		t.Errorf("the job saw %q, %v; want the notes put in", got, err)
	}
	for _, user := range []string{alice, reader} {
		data, err := f.getFiles(user, "inputs")
		if err != nil {
			t.Fatalf("get files as %s: %v", user, err)
		}
		if got := filesIn(t, data); got["notes.txt"] != "my notes\n" || got["result.txt"] != "done\n" || len(got) != 2 {
			t.Errorf("files as %s = %v, want the notes and the result", user, got)
		}
	}
	if _, err := f.getFiles(bob, "inputs"); !apierrors.IsForbidden(err) {
		t.Errorf("get files by another user: %v, want Forbidden", err)
	}
	if err := f.putFiles(alice, "inputs", "POST", tarOf(t, map[string]string{"late.txt": "x"})); !apierrors.IsConflict(err) {
		t.Errorf("put into a job that ran: %v, want Conflict", err)
	}

	held("posted")
	if err := f.putFiles(alice, "posted", "POST", tarOf(t, map[string]string{"notes.txt": "posted\n"})); err != nil {
		t.Fatalf("post by the owner: %v", err)
	}
	f.patch("posted", `{"spec":{"hold":false}}`)
	f.finished("posted")
	if got, err := f.log(f.as(alice), "posted", streamv1alpha1.ShellJobLogOptions{}); err != nil || got != "posted\n" {
		t.Errorf("the job saw %q, %v; want the notes posted", got, err)
	}

	f.job("free", alice, "sleep 300")
	if err := f.putFiles(alice, "free", "PUT", tarOf(t, map[string]string{"notes.txt": "x"})); !apierrors.IsConflict(err) {
		t.Errorf("put into a job that is not held: %v, want Conflict", err)
	}
	f.create(utiltesting.MakeShellJob("queued", f.cluster.Namespace).Pool("none").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Obj())
	if _, err := f.getFiles(alice, "queued"); !apierrors.IsBadRequest(err) {
		t.Errorf("get files of a job that has not started: %v, want BadRequest", err)
	}
	if sj := f.waitJob("free", "started", shelljob.IsStarted); !sj.Status.Ran {
		t.Fatal("not started")
	}
}
