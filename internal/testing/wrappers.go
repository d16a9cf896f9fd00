package testing

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ShellJobWrapper builds a ShellJob.
type ShellJobWrapper struct{ shellv1alpha1.ShellJob }

// MakeShellJob returns a CLI job running `true` in the default pool.
func MakeShellJob(name, ns string) *ShellJobWrapper {
	return &ShellJobWrapper{shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: shellv1alpha1.ShellJobSpec{
			Command: "true",
			Origin:  shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "tester"},
		},
	}}
}

// Obj returns the built job.
func (w *ShellJobWrapper) Obj() *shellv1alpha1.ShellJob { return &w.ShellJob }

// Clone returns a deep copy of the wrapper.
func (w *ShellJobWrapper) Clone() *ShellJobWrapper {
	return &ShellJobWrapper{*w.ShellJob.DeepCopy()}
}

// Command sets the command.
func (w *ShellJobWrapper) Command(cmd string) *ShellJobWrapper {
	w.Spec.Command = cmd
	return w
}

// Mode sets the mode.
func (w *ShellJobWrapper) Mode(m shellv1alpha1.ShellJobMode) *ShellJobWrapper {
	w.Spec.Mode = m
	return w
}

// Pool sets the pool.
func (w *ShellJobWrapper) Pool(p string) *ShellJobWrapper {
	w.Spec.Pool = p
	return w
}

// Origin sets the origin.
func (w *ShellJobWrapper) Origin(o shellv1alpha1.ShellJobOrigin) *ShellJobWrapper {
	w.Spec.Origin = o
	return w
}

// Stop asks the job to stop for the given reason.
func (w *ShellJobWrapper) Stop(r shellv1alpha1.StopReason) *ShellJobWrapper {
	w.Spec.Stop = true
	w.Spec.StopReason = r
	return w
}

// StopBy names who set stop.
func (w *ShellJobWrapper) StopBy(user string) *ShellJobWrapper {
	w.Spec.StopBy = user
	return w
}

// User sets the origin's user.
func (w *ShellJobWrapper) User(user string) *ShellJobWrapper {
	w.Spec.Origin.User = user
	return w
}

// Approval sets the decision on the job's approval.
func (w *ShellJobWrapper) Approval(d shellv1alpha1.ApprovalDecision, by string) *ShellJobWrapper {
	w.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: d, By: by}
	return w
}

// Hold keeps the job from starting until it is cleared.
func (w *ShellJobWrapper) Hold() *ShellJobWrapper {
	w.Spec.Hold = true
	return w
}

// Labels sets the labels.
func (w *ShellJobWrapper) Labels(l map[string]string) *ShellJobWrapper {
	w.ObjectMeta.Labels = l
	return w
}

// Annotation sets an annotation.
func (w *ShellJobWrapper) Annotation(key, value string) *ShellJobWrapper {
	if w.ObjectMeta.Annotations == nil {
		w.ObjectMeta.Annotations = map[string]string{}
	}
	w.ObjectMeta.Annotations[key] = value
	return w
}

// ShellPoolWrapper builds a ShellPool.
type ShellPoolWrapper struct{ shellv1alpha1.ShellPool }

// MakeShellPool returns a pool with the API's defaults.
func MakeShellPool(name, ns string) *ShellPoolWrapper {
	return &ShellPoolWrapper{shellv1alpha1.ShellPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}}
}

// Obj returns the built pool.
func (w *ShellPoolWrapper) Obj() *shellv1alpha1.ShellPool { return &w.ShellPool }

// Clone returns a deep copy of the wrapper.
func (w *ShellPoolWrapper) Clone() *ShellPoolWrapper {
	return &ShellPoolWrapper{*w.ShellPool.DeepCopy()}
}

// Replicas sets the number of workers.
func (w *ShellPoolWrapper) Replicas(n int32) *ShellPoolWrapper {
	w.Spec.Replicas = n
	return w
}

// StatefulWorker sets the index of the stateful worker.
func (w *ShellPoolWrapper) StatefulWorker(i int32) *ShellPoolWrapper {
	w.Spec.StatefulWorker = i
	return w
}

// Image sets the worker image.
func (w *ShellPoolWrapper) Image(img string) *ShellPoolWrapper {
	w.Spec.Image = img
	return w
}

// Shell sets the shell that runs the commands.
func (w *ShellPoolWrapper) Shell(shell string) *ShellPoolWrapper {
	w.Spec.Shell = shell
	return w
}

// MaxRunningPerUser caps the jobs of one user on workers at once.
func (w *ShellPoolWrapper) MaxRunningPerUser(n int32) *ShellPoolWrapper {
	w.Spec.MaxRunningPerUser = &n
	return w
}

// Approval makes the pool's jobs wait for approval, timeout seconds at most.
func (w *ShellPoolWrapper) Approval(timeout int32) *ShellPoolWrapper {
	w.Spec.Approval = &shellv1alpha1.ShellPoolApproval{TimeoutSeconds: timeout}
	return w
}

// ServiceAccount sets the ServiceAccount of the workers.
func (w *ShellPoolWrapper) ServiceAccount(name string) *ShellPoolWrapper {
	w.Spec.ServiceAccountName = name
	return w
}
