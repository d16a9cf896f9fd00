package streamapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/kubeutil"
	"shelljob.dev/shelljob/internal/shelljob"
)

// jobs finds the ShellJobs of the operator's namespace and their workers:
// in the operator's cache, or from the API server when the cache has not
// seen them yet (a job created a moment ago, a worker just made by
// another replica).
type jobs struct {
	// namespace holds the jobs; workerNamespace their workers unless a
	// job's status.podNamespace says otherwise.
	namespace, workerNamespace string
	cache                      client.Reader
	live                       client.Reader
	feed                       *kubeutil.Feed
	// writer marks jobs delivered.
	writer client.Writer
}

// deliveryWait bounds how long a delivered mark waits for the job's end
// to be recorded, and its write.
const deliveryWait = time.Minute

// markDelivered marks the job key of uid delivered, in the background,
// once the job's status records its end: the mark comes after the end, as
// a reader's own does, so that the operator's writes of the end (and of a
// stop) meet no write of the mark. Its reader, gone with the output's
// end, hears nothing of it: a mark that fails leaves the job to its
// delivery grace, as a reader that died before its own mark does.
func (j *jobs) markDelivered(ctx context.Context, key types.NamespacedName, uid types.UID) {
	log := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWait)
	go func() {
		defer cancel()
		_, err := j.wait(ctx, key, func(sj *shellv1alpha1.ShellJob) (bool, error) {
			if sj.UID != uid {
				return false, apierrors.NewConflict(jobResource, key.Name, fmt.Errorf("the job was replaced"))
			}
			return shelljob.IsFinished(sj), nil
		})
		if err == nil {
			sj := &shellv1alpha1.ShellJob{}
			sj.Namespace, sj.Name = key.Namespace, key.Name
			err = j.writer.Patch(ctx, sj, client.RawPatch(types.MergePatchType, shelljob.DeliveredPatch(uid, time.Now())))
		}
		if err != nil {
			log.Error(err, "Could not mark a job delivered after its reader read it all", "job", key)
		}
	}()
}

// get returns job key, with a NotFound status when there is none.
func (j *jobs) get(ctx context.Context, key types.NamespacedName) (*shellv1alpha1.ShellJob, error) {
	if key.Namespace != j.namespace {
		err := apierrors.NewNotFound(jobResource, key.Name)
		err.ErrStatus.Message += fmt.Sprintf(": this API serves the ShellJobs of namespace %s, not %s", j.namespace, key.Namespace)
		return nil, err
	}
	var sj shellv1alpha1.ShellJob
	err := j.cache.Get(ctx, key, &sj)
	if apierrors.IsNotFound(err) {
		err = j.live.Get(ctx, key, &sj)
	}
	if err != nil {
		return nil, err
	}
	return &sj, nil
}

// wait calls done with job key as it is now and after each change, until
// done says it is done, done fails, the job is gone or ctx ends, and
// returns the job done saw last.
func (j *jobs) wait(ctx context.Context, key types.NamespacedName, done func(*shellv1alpha1.ShellJob) (bool, error)) (*shellv1alpha1.ShellJob, error) {
	changed, unsubscribe := j.feed.Subscribe(key)
	defer unsubscribe()
	for {
		sj, err := j.get(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok, err := done(sj); ok || err != nil {
			return sj, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return sj, ctx.Err()
		}
	}
}

// onChange runs f, in a goroutine of its own, each time job key changes,
// until ctx ends; it returns once that goroutine waits for the first
// change.
func (j *jobs) onChange(ctx context.Context, key types.NamespacedName, f func(*shellv1alpha1.ShellJob)) {
	changed, unsubscribe := j.feed.Subscribe(key)
	go func() {
		defer unsubscribe()
		for {
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
			if sj, err := j.get(ctx, key); err == nil {
				f(sj)
			}
		}
	}()
}

// worker is the pod that runs or ran the job, with a Gone status when it
// is no more: deleted, or replaced by a pod of the same name created after
// the job started, whose agent never knew the job.
func (j *jobs) worker(ctx context.Context, sj *shellv1alpha1.ShellJob) (types.NamespacedName, error) {
	return j.workerIn(ctx, j.cache, sj)
}

// workerNow is worker as the API server has it now: for an agent that
// does not know the job, whose pod the cache may not have seen go.
func (j *jobs) workerNow(ctx context.Context, sj *shellv1alpha1.ShellJob) (types.NamespacedName, error) {
	return j.workerIn(ctx, j.live, sj)
}

func (j *jobs) workerIn(ctx context.Context, r client.Reader, sj *shellv1alpha1.ShellJob) (types.NamespacedName, error) {
	key := types.NamespacedName{Namespace: cmp.Or(sj.Status.PodNamespace, j.workerNamespace, sj.Namespace), Name: sj.Status.Pod}
	var pod corev1.Pod
	err := r.Get(ctx, key, &pod)
	if apierrors.IsNotFound(err) && r != j.live {
		err = j.live.Get(ctx, key, &pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return key, gone(fmt.Sprintf("the worker pod %s of shelljob %s is gone: the job's output and files are lost", key, sj.Name))
	case err != nil:
		return key, apierrors.NewInternalError(fmt.Errorf("get the worker pod %s of shelljob %s: %w", key, sj.Name, err))
	}
	if start := sj.Status.StartTime; start != nil && pod.CreationTimestamp.After(start.Time) {
		return key, gone(fmt.Sprintf("the worker pod %s of shelljob %s was replaced at %s, after the job started at %s: the job's output and files are lost",
			key, sj.Name, pod.CreationTimestamp.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339)))
	}
	return key, nil
}

// gone is the status of a job's output or files that are lost: 410 Gone,
// which no retry mends (apierrors.NewGone's own is deprecated for the
// watch's expired versions).
func gone(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone, Message: msg,
	}}
}
