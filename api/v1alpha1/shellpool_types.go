/*
Copyright 2026 The shelljob Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShellPoolPodOverlay is what a pool may change in its worker pods.
type ShellPoolPodOverlay struct {
	// NodeSelector constrains the workers to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the worker pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// SecurityContext of the worker pods. Defaults to the RuntimeDefault
	// seccomp profile. The agent's container runs as root with the few
	// capabilities it needs to run each job as a user of its own, whatever
	// user this names.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// Labels added to the worker pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the worker pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ShellPoolSpec is a set of warm worker pods that run ShellJobs.
// +kubebuilder:validation:XValidation:rule="self.statefulWorker < self.replicas",message="statefulWorker must be below replicas"
type ShellPoolSpec struct {
	// Replicas is the number of workers. Defaults to 16.
	// +optional
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	Replicas int32 `json:"replicas,omitempty"`

	// StatefulWorker is the index of the worker whose persistent shell runs
	// Stateful jobs. Defaults to 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	StatefulWorker int32 `json:"statefulWorker"`

	// Image is the worker image, an image reference such as
	// registry.example.com/shelljob/worker:0.1.0. Defaults to the
	// operator's worker image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self != ''",message="image must not be empty: leave it out for the operator's worker image"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:]]')",message="image must not contain whitespace"
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('[[:space:]]') || self.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="image must be an image reference such as registry.example.com/shelljob/worker:0.1.0: a lower-case path, an optional :tag and an optional @digest"
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the worker image. Defaults to IfNotPresent.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Resources of each worker's container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// SpoolSizeLimit is the sizeLimit of each worker's spool volume, the
	// emptyDir that holds its jobs' output and files. A worker whose spool
	// grows past it is evicted by the kubelet, and its jobs end as lost.
	// Defaults to 1Gi.
	// +optional
	// +kubebuilder:default="1Gi"
	SpoolSizeLimit *resource.Quantity `json:"spoolSizeLimit,omitempty"`

	// ServiceAccountName is the ServiceAccount whose token the commands get,
	// for their own use of the Kubernetes API. Unset, workers get no token.
	// The operator makes workers only with a ServiceAccount of its
	// --allowed-service-accounts, and never with its own.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="serviceAccountName must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Template overlays the worker pods.
	// +optional
	Template ShellPoolPodOverlay `json:"template,omitempty"`

	// Shell runs the commands, as `SHELL -c COMMAND`: an absolute path, or
	// a program name that the agent looks up in the worker's PATH.
	// Defaults to zsh.
	// +optional
	// +kubebuilder:default=zsh
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:]]')",message="shell must not contain whitespace: it names one program, not a command line"
	// +kubebuilder:validation:XValidation:rule="self.matches('[[:space:]]') || self.matches('^(/[^[:cntrl:]]*|[a-zA-Z0-9._+-]+)$')",message="shell must be an absolute path, such as /bin/zsh, or a program name on the worker's PATH, such as zsh"
	Shell string `json:"shell,omitempty"`

	// RestartedAt, when changed, makes a new revision, as
	// `kubectl rollout restart` does: new workers come up, and old ones take
	// no new jobs and go once their running jobs end. Changing it needs the
	// restart verb on the pool (an admission policy checks it).
	// +optional
	RestartedAt *metav1.Time `json:"restartedAt,omitempty"`

	// MaxRunningPerUser caps the jobs of one user (a job's
	// spec.origin.user) that hold workers of the pool at once, Direct jobs
	// included. A job whose user is at the cap waits, and the jobs of other
	// users behind it are placed past it; one user's jobs keep their order.
	// Unset: no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxRunningPerUser *int32 `json:"maxRunningPerUser,omitempty"`

	// Approval makes every job of the pool wait, unplaced, until someone
	// allowed to approve on the pool, other than its author, approves it
	// (the job's spec.approval). Unset: jobs need no approval.
	// +optional
	Approval *ShellPoolApproval `json:"approval,omitempty"`
}

// ShellPoolApproval says how the jobs of a pool are approved.
type ShellPoolApproval struct {
	// TimeoutSeconds is how long a job waits for a decision, from when the
	// operator puts it in AwaitingApproval; a job not decided by then ends
	// as Expired without running. Defaults to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// Chat is the Telegram chat (a Bot API chat id) where the bot asks the
	// approvers. 0, the default: the job's own chat.
	// +optional
	Chat int64 `json:"chat,omitempty"`
}

// OldRevision is a retired revision whose workers still run jobs.
type OldRevision struct {
	// Revision is the retired revision.
	Revision string `json:"revision"`
	// Pods is how many of its workers are left.
	Pods int32 `json:"pods"`
	// RunningJobs is how many jobs still run on them.
	RunningJobs int32 `json:"runningJobs"`
}

// Condition types of a ShellPool.
const (
	// ShellPoolAvailable is True when every worker of the current revision is ready.
	ShellPoolAvailable = "Available"
	// ShellPoolJobsIsolated is True when every worker of the current
	// revision that reported runs each job in namespaces of its own (no job
	// sees another's processes), False when one does not, and Unknown
	// while none reported.
	ShellPoolJobsIsolated = "JobsIsolated"
	// ShellPoolSpoolRoom is True when every worker of the current revision
	// has room in its spool for another job, False when one is full of
	// output not delivered yet and takes no new job.
	ShellPoolSpoolRoom = "SpoolRoom"
)

// Reasons of the ShellPool conditions.
const (
	// ShellPoolAvailableReasonAllReady: every worker of the current revision is ready.
	ShellPoolAvailableReasonAllReady = "AllWorkersReady"
	// ShellPoolAvailableReasonNotReady: some workers of the current revision
	// are missing or not ready yet.
	ShellPoolAvailableReasonNotReady = "WorkersNotReady"
	// ShellPoolAvailableReasonServiceAccountNotAllowed: the pool names a
	// ServiceAccount that the operator may not give workers, so it makes
	// none.
	ShellPoolAvailableReasonServiceAccountNotAllowed = "ServiceAccountNotAllowed"
	// ShellPoolJobsIsolatedReasonNamespaces: each job runs in user, PID,
	// mount and IPC namespaces of its own.
	ShellPoolJobsIsolatedReasonNamespaces = "Namespaces"
	// ShellPoolJobsIsolatedReasonProcessesVisible: some worker runs jobs in
	// the pod's namespaces, where each sees the others' processes and
	// command lines; the message says why.
	ShellPoolJobsIsolatedReasonProcessesVisible = "ProcessesVisible"
	// ShellPoolJobsIsolatedReasonNotReported: no worker's agent reported
	// yet, or they are older than the report.
	ShellPoolJobsIsolatedReasonNotReported = "NotReported"
	// ShellPoolSpoolRoomReasonRoom: every worker has room.
	ShellPoolSpoolRoomReasonRoom = "Room"
	// ShellPoolSpoolRoomReasonSpoolFull: some workers are full, and take
	// no new job until output is delivered.
	ShellPoolSpoolRoomReasonSpoolFull = "SpoolFull"
)

// ShellPoolStatus counts the pool's workers and jobs.
type ShellPoolStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Revision is the current revision: a hash of the pod template and
	// RestartedAt.
	// +optional
	Revision string `json:"revision,omitempty"`

	// Replicas counts the workers of the current revision.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas counts the ready workers of the current revision.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// WorkerNamespace is where the worker pods run: the operator's
	// --worker-namespace, or the pool's own namespace.
	// +optional
	WorkerNamespace string `json:"workerNamespace,omitempty"`

	// Ready is ReadyReplicas/spec.replicas, for listings.
	// +optional
	Ready string `json:"ready,omitempty"`

	// BusyReplicas counts the workers of the current revision that run at
	// least one job.
	// +optional
	BusyReplicas int32 `json:"busyReplicas,omitempty"`

	// QueuedJobs counts the jobs waiting for a worker of this pool.
	// +optional
	QueuedJobs int32 `json:"queuedJobs,omitempty"`

	// OldRevisions are retired revisions that still hold running jobs.
	// +optional
	// +listType=map
	// +listMapKey=revision
	OldRevisions []OldRevision `json:"oldRevisions,omitempty"`

	// Conditions: Available, JobsIsolated, SpoolRoom.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:shortName=sp,categories=shelljob-all
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Busy",type=integer,JSONPath=`.status.busyReplicas`
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queuedJobs`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ShellPool keeps warm worker pods that run ShellJobs.
type ShellPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ShellPoolSpec `json:"spec,omitempty"`

	// +optional
	Status ShellPoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ShellPoolList is a list of ShellPools.
type ShellPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShellPool `json:"items"`
}
