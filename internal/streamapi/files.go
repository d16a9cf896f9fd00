package streamapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// contentTypeTar is the type of a files stream.
const contentTypeTar = "application/x-tar"

// FilesREST serves shelljobs/files: the job's $SHELLJOB_OUT as a tar
// stream. GET reads it from a job that started, from an offset of the
// stream for a job that ended (ShellJobFilesOptions); PUT and POST put a
// tar stream into a held job before it starts (its input files). The caps
// on what goes in and out stay where they are: the agent's, and
// internal/outfiles' in the readers.
type FilesREST struct {
	streams
}

var _ rest.Connecter = (*FilesREST)(nil)

// New implements rest.Storage.
func (r *FilesREST) New() runtime.Object { return &shellv1alpha1.ShellJob{} }

// Destroy implements rest.Storage.
func (r *FilesREST) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (r *FilesREST) ConnectMethods() []string {
	return []string{http.MethodGet, http.MethodPut, http.MethodPost}
}

// NewConnectOptions implements rest.Connecter.
func (r *FilesREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &streamv1alpha1.ShellJobFilesOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *FilesREST) Connect(ctx context.Context, name string, obj runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := obj.(*streamv1alpha1.ShellJobFilesOptions)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("files options of type %T", obj))
	}
	if opts.Offset < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("offset %d: an offset counts bytes from 0", opts.Offset))
	}
	key, err := r.key(ctx, name)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := r.requestContext(req)
		defer cancel()
		if req.Method == http.MethodGet {
			resp := newResponse(w, req, contentTypeTar)
			resp.finish(r.ended(req, r.get(ctx, key, opts.Offset, resp)), responder)
			return
		}
		if opts.Offset != 0 {
			responder.Error(apierrors.NewBadRequest("offset is a GET's: the files put go in whole"))
			return
		}
		if err := r.ended(req, r.put(ctx, key, req)); err != nil {
			responder.Error(err)
			return
		}
		responder.Object(http.StatusOK, &metav1.Status{Status: metav1.StatusSuccess,
			Message: fmt.Sprintf("the files are in shelljob %s's $SHELLJOB_OUT", name)})
	}), nil
}

// get writes the files of a job that started to resp, from byte offset
// of their tar stream on, which only a job that ended takes past 0: its
// stream is then the same at every read.
func (r *FilesREST) get(ctx context.Context, key types.NamespacedName, offset int64, resp *response) error {
	waitCtx, cancel := context.WithTimeout(ctx, shelljob.StartRecordWait)
	sj, err := r.jobs.wait(waitCtx, key, startRecorded)
	cancel()
	if err != nil && (sj == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	switch {
	case !shelljob.IsStarted(sj):
		return apierrors.NewBadRequest(fmt.Sprintf("shelljob %s has not started: its files are not there yet", sj.Name))
	case offset > 0 && !shelljob.IsFinished(sj):
		return apierrors.NewBadRequest(fmt.Sprintf("offset %d: shelljob %s is running, and its files may change: read them from 0, or from an offset once it ended", offset, sj.Name))
	}
	pod, err := r.jobs.worker(ctx, sj)
	if err != nil {
		return err
	}
	err = r.agent.GetFiles(ctx, pod, string(sj.UID), offset, flushed{resp})
	if offset > 0 && errors.Is(err, agentapi.ErrUsage) && !resp.sent() {
		// An agent older than offsets: its whole stream, the bytes before
		// the offset dropped here.
		err = r.agent.GetFiles(ctx, pod, string(sj.UID), 0, &agentapi.Skipper{W: flushed{resp}, Skip: offset})
	}
	return agentError(err, sj, pod)
}

// startRecorded tells whether the job's status says whether it started
// (shelljob.IsStarting).
func startRecorded(sj *shellv1alpha1.ShellJob) (bool, error) {
	return !shelljob.IsStarting(sj), nil
}

// put unpacks the request's tar stream into a held job's $SHELLJOB_OUT,
// once the job is on its worker.
func (r *FilesREST) put(ctx context.Context, key types.NamespacedName, req *http.Request) error {
	sj, err := r.jobs.wait(ctx, key, func(sj *shellv1alpha1.ShellJob) (bool, error) {
		switch {
		case shelljob.IsStarted(sj) || shelljob.IsFinished(sj):
			return false, apierrors.NewConflict(jobResource, sj.Name, errors.New("the job has started: its input files go in before"))
		case !sj.Spec.Hold:
			return false, apierrors.NewConflict(jobResource, sj.Name, errors.New("the job is not held (spec.hold): it may start before its files are in"))
		}
		return shelljob.IsAssigned(sj), nil
	})
	if err != nil {
		return err
	}
	pod, err := r.jobs.worker(ctx, sj)
	if err != nil {
		return err
	}
	return agentError(r.agent.PutFiles(ctx, pod, string(sj.UID), req.Body), sj, pod)
}

// agentError is the status of an agent's error about the job on pod.
func agentError(err error, sj *shellv1alpha1.ShellJob, pod types.NamespacedName) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agentapi.ErrStarted):
		return apierrors.NewConflict(jobResource, sj.Name, errors.New("the job has started: its input files go in before"))
	case errors.Is(err, agentapi.ErrUnknownJob):
		return gone(fmt.Sprintf("the files of shelljob %s are lost: its worker %s does not have them any more (the worker was replaced, or the job's spool removed once the job was delivered): %v", sj.Name, pod, err))
	case errors.Is(err, context.Canceled):
		return err
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the agent of shelljob %s's worker %s: %v", sj.Name, pod, err))
}

// flushed writes to a response, flushing each write.
type flushed struct{ r *response }

func (f flushed) Write(p []byte) (n int, err error) {
	err = f.r.do(func() error {
		n, err = f.r.Write(p)
		return err
	})
	return n, err
}
