package controllers

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// countAnswers wraps rt so that n counts the bytes of the API server's
// answers to PATCH calls.
func countAnswers(rt http.RoundTripper, n *atomic.Int64) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.Method == http.MethodPatch {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: n}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestPatchJobAnswersMetadata: a job's status and metadata patches write
// what they say, leave the command alone, and come back as the job's
// metadata alone, not as the job with its 64 KiB command; the new
// resourceVersion is the job's, so that the next optimistic write goes
// over it, and a write over an older one is a conflict.
func TestPatchJobAnswersMetadata(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	command := bigCommand("echo hi")
	job := createJob(t, utiltesting.MakeShellJob("big", ns).Command(command))

	var answered atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countAnswers(rt, &answered) }
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	read := job.DeepCopy()
	base := job.DeepCopy()
	job.Status.Number = 7
	if err := patchJob(ctx, c, job, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), "status"); err != nil {
		t.Fatalf("status patch: %v", err)
	}
	base = job.DeepCopy()
	job.Labels = map[string]string{"shelljob.dev/test": "yes"}
	if err := patchJob(ctx, c, job, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), ""); err != nil {
		t.Fatalf("metadata patch: %v", err)
	}

	if got, most := answered.Load(), int64(len(command)/4); got > most {
		t.Errorf("the two answers were %d bytes, more than %d: the command came back", got, most)
	}
	var got shellv1alpha1.ShellJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Number != 7 || got.Labels["shelljob.dev/test"] != "yes" || got.Spec.Command != command {
		t.Errorf("the job on the server: number %d, labels %v, command of %d bytes (want 7, the label, %d bytes)",
			got.Status.Number, got.Labels, len(got.Spec.Command), len(command))
	}
	if job.ResourceVersion != got.ResourceVersion || job.Labels["shelljob.dev/test"] != "yes" || job.Spec.Command != command {
		t.Errorf("the job after its patches: resourceVersion %s (the server's %s), labels %v, command of %d bytes",
			job.ResourceVersion, got.ResourceVersion, job.Labels, len(job.Spec.Command))
	}

	stale := read.DeepCopy()
	read.Status.Number = 8
	err = patchJob(ctx, c, read, client.MergeFromWithOptions(stale, client.MergeFromWithOptimisticLock{}), "status")
	if !apierrors.IsConflict(err) {
		t.Errorf("a status patch over the resourceVersion first read: %v, want a conflict", err)
	}
}
