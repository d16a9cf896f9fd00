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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShellJobMode says how a command runs on its pool.
// +kubebuilder:validation:Enum=Fork;Stateful;Direct;Console
type ShellJobMode string

const (
	// ModeFork runs the command in a fresh shell on any free worker (.a).
	ModeFork ShellJobMode = "Fork"
	// ModeStateful feeds the command to the persistent shell of the pool's
	// stateful worker, which keeps cwd, variables and functions between
	// commands (.af). It waits while that worker is busy.
	ModeStateful ShellJobMode = "Stateful"
	// ModeDirect runs the command at once in a fresh shell on the least busy
	// worker, even a busy one (.aa). It is the escape hatch when every worker
	// is taken.
	ModeDirect ShellJobMode = "Direct"
	// ModeConsole runs the command as a Fork job does, on a free worker as
	// a user of its own, but with a terminal (a pseudo-terminal) for its
	// standard streams, whose other end a person attaches to through the
	// API (`kubectl shelljob console`, which runs the pool's shell there
	// as a login shell). Its output is spooled as any job's. A console
	// that nobody attaches to within a minute of its start, or whose
	// attach ends before it does, is hung up (SIGHUP to its session), as a
	// closed ssh session is. It has no idle timeout unless it names one:
	// its output is a person's typing.
	ModeConsole ShellJobMode = "Console"
)

// StopReason says why a job was asked to stop. It names no one.
// +kubebuilder:validation:Enum=User;Shutdown;Timeout
type StopReason string

const (
	// StopReasonUser is a stop by a person: .k, a Stop button, Ctrl-C in the CLI.
	StopReasonUser StopReason = "User"
	// StopReasonShutdown is a stop because the bot is going offline.
	StopReasonShutdown StopReason = "Shutdown"
	// StopReasonTimeout is a stop by the job's idle timeout or deadline.
	StopReasonTimeout StopReason = "Timeout"
)

// OriginSource says which client created a job.
// +kubebuilder:validation:Enum=telegram;cli
type OriginSource string

const (
	OriginTelegram OriginSource = "telegram"
	OriginCLI      OriginSource = "cli"
)

// ShellJobOrigin records who asked for a job and where its output goes.
// Clients use it to find their jobs again after a restart. An admission
// policy ties it to the request that creates the job: User is the
// creator's Kubernetes user name, and only the bot, impersonating the
// identity the chart maps a Telegram user to, creates a Telegram job.
type ShellJobOrigin struct {
	// Source is the client that created the job.
	// +required
	Source OriginSource `json:"source"`

	// User is the Kubernetes user name of the person who sent the command:
	// the CLI's caller, or the identity the bot impersonated for a Telegram
	// user (TelegramUser). Jobs of older bots hold the Telegram user id
	// here, and no TelegramUser: shelljob.TelegramUser reads both.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	User string `json:"user,omitempty"`

	// TelegramUser is the Telegram user id of the sender of a Telegram
	// command.
	// +optional
	TelegramUser int64 `json:"telegramUser,omitempty"`

	// Chat is the Telegram chat of the command message, as a Bot API chat id
	// (negative for groups). Empty for guest queries and the CLI.
	// +optional
	Chat int64 `json:"chat,omitempty"`

	// Topic is the forum topic of the command message, if any.
	// +optional
	Topic int64 `json:"topic,omitempty"`

	// Message is the id of the command message in Chat.
	// +optional
	Message int64 `json:"message,omitempty"`

	// GuestQuery is the guest chat query that the job answers, when the
	// command came from a guest chat.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	GuestQuery string `json:"guestQuery,omitempty"`
}

// ApprovalDecision is a person's decision on a job that waits for approval.
// +kubebuilder:validation:Enum=Approved;Denied
type ApprovalDecision string

const (
	// ApprovalApproved lets the job run.
	ApprovalApproved ApprovalDecision = "Approved"
	// ApprovalDenied ends the job without running it.
	ApprovalDenied ApprovalDecision = "Denied"
)

// ShellJobApproval is the decision on a job of a pool that requires
// approval (ShellPool spec.approval). It is set once; an admission policy
// checks that By is the person who sets it, that they are not the job's
// author, and that they may approve on the job's pool.
type ShellJobApproval struct {
	// Decision is Approved or Denied.
	// +required
	Decision ApprovalDecision `json:"decision"`

	// By is the Kubernetes user name of the person who decided.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	By string `json:"by"`

	// TelegramUser is the Telegram user id of the person who decided, when
	// they did in a chat (the bot impersonating them).
	// +optional
	TelegramUser int64 `json:"telegramUser,omitempty"`
}

// ShellJobSpec is one shell command and how to run it.
// +kubebuilder:validation:XValidation:rule="!has(self.hold) || !self.hold || (has(oldSelf.hold) && oldSelf.hold)",message="hold can only be cleared"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.stop) || !oldSelf.stop || (has(self.stop) && self.stop)",message="stop cannot be undone"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.stop) || !oldSelf.stop || (has(self.stopReason) == has(oldSelf.stopReason) && (!has(self.stopReason) || self.stopReason == oldSelf.stopReason))",message="stopReason cannot change once stop is set"
// +kubebuilder:validation:XValidation:rule="!has(self.stopBy) || (has(self.stop) && self.stop)",message="stopBy is set with stop"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.stop) || !oldSelf.stop || (has(self.stopBy) == has(oldSelf.stopBy) && (!has(self.stopBy) || self.stopBy == oldSelf.stopBy))",message="stopBy cannot change once stop is set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approval) || (has(self.approval) && self.approval == oldSelf.approval)",message="approval cannot change once set"
type ShellJobSpec struct {
	// Command is the shell code to run, as given to `zsh -c`.
	// +required
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="command must not be empty"
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 65536",message="command must be at most 64 KiB"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="command is immutable"
	Command string `json:"command"`

	// Mode says where and how the command runs: Fork, Stateful, Direct or
	// Console. Defaults to Fork.
	// +optional
	// +kubebuilder:default=Fork
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode is immutable"
	Mode ShellJobMode `json:"mode,omitempty"`

	// Pool is the name of the ShellPool, in the job's namespace, that runs
	// the command. Defaults to "shell".
	// +optional
	// +kubebuilder:default=shell
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	Pool string `json:"pool,omitempty"`

	// Origin records who asked for the job and where its output goes.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="origin is immutable"
	Origin ShellJobOrigin `json:"origin"`

	// Hold keeps the job from starting once it has a worker. A client that
	// has input files sets it at creation, waits for Status.Pod, puts the
	// files into the job's directory there (agentapi.Client.PutFiles), then
	// clears it. It can only go from true to false.
	// +optional
	Hold bool `json:"hold,omitempty"`

	// Stop asks for the job to stop. It can only go from false to true. A
	// queued job then never runs; a running one gets SIGINT, SIGTERM and
	// SIGKILL on its process group, 2 s apart, until the group is empty.
	// +optional
	Stop bool `json:"stop,omitempty"`

	// StopReason says why Stop was set. Defaults to User when Stop is set
	// without one.
	// +optional
	StopReason StopReason `json:"stopReason,omitempty"`

	// StopBy is the Kubernetes user name of whoever set Stop. An admission
	// policy checks that it is the caller (and, where the cluster serves
	// MutatingAdmissionPolicy, fills it in); it cannot change once Stop is
	// set. The operator's Events and the job's end name them.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	StopBy string `json:"stopBy,omitempty"`

	// Approval is the decision on a job of a pool that requires approval:
	// the job is not placed until it is Approved, and a Denied one ends
	// without running. It is set once, by someone allowed to approve on
	// the pool other than the job's author, which an admission policy
	// checks. On a pool that requires no approval it changes nothing.
	// +optional
	Approval *ShellJobApproval `json:"approval,omitempty"`

	// IdleTimeoutSeconds stops the job, with reason Timeout, after that many
	// seconds without output. Unset means no idle timeout.
	// +optional
	// +kubebuilder:validation:Minimum=1
	IdleTimeoutSeconds *int64 `json:"idleTimeoutSeconds,omitempty"`

	// ActiveDeadlineSeconds stops the job, with reason Timeout, that many
	// seconds after its command started. Unset means no deadline.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the job that many seconds after its
	// CompletionTime, as for a batch Job, or after its delivery mark
	// (AnnotationDelivered) if that is later. A Telegram job is kept until
	// the bot marks it delivered or the operator's delivery grace after its
	// end has passed. Unset means the operator's default (--job-ttl, 24 h).
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ShellJobPhase is where a job is in its life.
// +kubebuilder:validation:Enum=AwaitingApproval;Queued;Running;Stopping;Succeeded;Failed;Stopped;Denied;Expired
type ShellJobPhase string

const (
	// PhaseAwaitingApproval: its pool requires approval, and no one has
	// decided yet; it is not placed until someone approves it.
	PhaseAwaitingApproval ShellJobPhase = "AwaitingApproval"
	// PhaseQueued: waiting for a worker of its pool.
	PhaseQueued ShellJobPhase = "Queued"
	// PhaseRunning: the command runs on Status.Pod.
	PhaseRunning ShellJobPhase = "Running"
	// PhaseStopping: asked to stop; the command may still be ending.
	PhaseStopping ShellJobPhase = "Stopping"
	// PhaseSucceeded: the command exited 0.
	PhaseSucceeded ShellJobPhase = "Succeeded"
	// PhaseFailed: the command exited non-zero, or could not run to its end
	// (its worker was lost).
	PhaseFailed ShellJobPhase = "Failed"
	// PhaseStopped: the command ended after a stop, or never ran because it
	// was stopped while queued (Status.Ran is false then).
	PhaseStopped ShellJobPhase = "Stopped"
	// PhaseDenied: someone denied the job its approval; it never ran.
	PhaseDenied ShellJobPhase = "Denied"
	// PhaseExpired: no one decided on the job within its pool's approval
	// timeout; it never ran.
	PhaseExpired ShellJobPhase = "Expired"
)

// Signal names a signal sent to a job's process group.
// +kubebuilder:validation:Enum=SIGINT;SIGTERM;SIGKILL
type Signal string

const (
	SIGINT  Signal = "SIGINT"
	SIGTERM Signal = "SIGTERM"
	SIGKILL Signal = "SIGKILL"
)

// StopStep is one signal sent to a job's process group.
type StopStep struct {
	// Signal is the signal sent.
	Signal Signal `json:"signal"`
	// Time is when it was sent.
	Time metav1.Time `json:"time"`
	// GroupEmpty tells whether the group had no process left right after it.
	// +optional
	GroupEmpty bool `json:"groupEmpty,omitempty"`
}

// ShellJobFiles counts the regular files of a job's $SHELLJOB_OUT, in
// every subdirectory and its input files included, and their bytes.
type ShellJobFiles struct {
	// Count is the number of regular files.
	// +kubebuilder:validation:Minimum=0
	Count int64 `json:"count"`
	// Bytes is their total size.
	// +kubebuilder:validation:Minimum=0
	Bytes int64 `json:"bytes"`
}

// Condition types of a ShellJob.
const (
	// ShellJobScheduled is True once a worker is assigned to the job.
	ShellJobScheduled = "Scheduled"
	// ShellJobFinished is True once the command has ended, or the job was
	// stopped before it ran. Its reason says how it ended.
	ShellJobFinished = "Finished"
	// ShellJobApproved is on the jobs of pools that require approval: False
	// while the job awaits a decision (AwaitingApproval), True once
	// approved, False again if denied or expired. Its message names who
	// decided.
	ShellJobApproved = "Approved"
)

// Reasons of the ShellJob conditions.
const (
	ShellJobScheduledReasonAssigned           = "Assigned"
	ShellJobScheduledReasonNoIdleWorker       = "NoIdleWorker"
	ShellJobScheduledReasonStatefulWorkerBusy = "StatefulWorkerBusy"
	ShellJobScheduledReasonPoolNotFound       = "PoolNotFound"
	ShellJobFinishedReasonExited              = "Exited"
	ShellJobFinishedReasonStopped             = "Stopped"
	ShellJobFinishedReasonStoppedBeforeRun    = "StoppedBeforeRun"
	ShellJobFinishedReasonWorkerLost          = "WorkerLost"
	// ShellJobFinishedReasonWorkerEvicted: the kubelet evicted the worker
	// while the command ran, as when the spool outgrew its sizeLimit.
	ShellJobFinishedReasonWorkerEvicted = "WorkerEvicted"
	// ShellJobFinishedReasonOutOfMemory: the command failed after the
	// out-of-memory killer killed in its worker, at the memory limit.
	ShellJobFinishedReasonOutOfMemory = "OutOfMemory"
	ShellJobFinishedReasonStartFailed = "StartFailed"
	// ShellJobFinishedReasonHoldTimedOut: the job was held (spec.hold) on
	// its worker longer than the operator's hold timeout; its command
	// never ran.
	ShellJobFinishedReasonHoldTimedOut = "HoldTimedOut"
)

// More reasons of the Scheduled condition.
const (
	// ShellJobScheduledReasonNoReadyWorker: the pool has no ready worker of
	// its current revision, so not even a Direct job can be placed.
	ShellJobScheduledReasonNoReadyWorker = "NoReadyWorker"
	// ShellJobScheduledReasonWorkerLost: the assigned worker went away
	// before the command started, and the job went back to the queue.
	ShellJobScheduledReasonWorkerLost = "WorkerLost"
	// ShellJobScheduledReasonServiceAccountNotAllowed: the pool names a
	// ServiceAccount that the operator may not give workers, so the job
	// waits until the pool or the operator's configuration changes.
	ShellJobScheduledReasonServiceAccountNotAllowed = "ServiceAccountNotAllowed"
	// ShellJobScheduledReasonSpoolFull: the workers the job could go to
	// have no room left in their spools, full of output not delivered yet;
	// it waits until deliveries free some room.
	ShellJobScheduledReasonSpoolFull = "SpoolFull"
	// ShellJobScheduledReasonMaxRunningPerUser: the job's user already has
	// as many jobs on workers of the pool as its maxRunningPerUser allows;
	// it waits for one of them to end, and other users' jobs behind it go
	// first.
	ShellJobScheduledReasonMaxRunningPerUser = "MaxRunningPerUser"
	// ShellJobScheduledReasonAwaitingApproval: the job's pool requires
	// approval, and the job has none yet.
	ShellJobScheduledReasonAwaitingApproval = "AwaitingApproval"
)

// Reasons of the Approved condition, and more of the Finished condition.
const (
	// ShellJobApprovedReasonAwaitingApproval: no one has decided yet.
	ShellJobApprovedReasonAwaitingApproval = "AwaitingApproval"
	// ShellJobApprovedReasonApproved: someone approved the job.
	ShellJobApprovedReasonApproved = "Approved"
	// ShellJobFinishedReasonDenied (Approved and Finished): someone denied
	// the job; it never ran.
	ShellJobFinishedReasonDenied = "Denied"
	// ShellJobFinishedReasonApprovalExpired (Approved and Finished): no one
	// decided within the pool's approval timeout; the job never ran.
	ShellJobFinishedReasonApprovalExpired = "ApprovalExpired"
)

// ShellJobStatus holds small facts about a job. Its output is never stored
// here: it lives in the worker's spool and is read through the agent.
type ShellJobStatus struct {
	// Number is the job's short sequence number, shown as #N. It is unique
	// in the namespace, also across restarts of every component.
	// +optional
	Number int64 `json:"number,omitempty"`

	// Summary is the start of the command on one line, for listings.
	// +optional
	Summary string `json:"summary,omitempty"`

	// Phase is where the job is in its life.
	// +optional
	Phase ShellJobPhase `json:"phase,omitempty"`

	// Ran tells whether the command was started. A job stopped while queued
	// never runs.
	// +optional
	Ran bool `json:"ran,omitempty"`

	// Pod is the worker pod that runs, or ran, the command.
	// +optional
	Pod string `json:"pod,omitempty"`

	// PodNamespace is the namespace of Pod: the pool's workerNamespace.
	// +optional
	PodNamespace string `json:"podNamespace,omitempty"`

	// Revision is the pool revision of Pod.
	// +optional
	Revision string `json:"revision,omitempty"`

	// PGID is the id of the command's process group in Pod.
	// +optional
	PGID int32 `json:"pgid,omitempty"`

	// ExitCode is the command's exit status, as a shell reports it: 128+N
	// after signal N.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// StartTime is when the command started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the command ended, or when the job was stopped
	// before it ran.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// OutputBytes counts the bytes the command wrote.
	// +optional
	OutputBytes int64 `json:"outputBytes,omitempty"`

	// DroppedBytes counts the written bytes the spool did not keep, under
	// its caps.
	// +optional
	DroppedBytes int64 `json:"droppedBytes,omitempty"`

	// Files counts what the command left in $SHELLJOB_OUT, as the agent
	// found it when the command ended. Unset when the agent did not say
	// (an older agent, or a job that did not end on its agent): fetch the
	// files to know.
	// +optional
	Files *ShellJobFiles `json:"files,omitempty"`

	// StopReason says why the job is stopping or was stopped: the client's
	// spec.stopReason (User when it named none) after spec.stop, or Timeout
	// when the operator stopped the job under its idle timeout or deadline.
	// The operator alone writes it; clients never set spec.stop for a
	// timeout.
	// +optional
	StopReason StopReason `json:"stopReason,omitempty"`

	// StopSteps are the signals sent to the process group after a stop, in
	// order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=3
	StopSteps []StopStep `json:"stopSteps,omitempty"`

	// Conditions: Scheduled, Finished, and Approved on the jobs of pools
	// that require approval.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sj,categories=shelljob-all
// +kubebuilder:printcolumn:name="#",type=integer,JSONPath=`.status.number`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.exitCode`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.origin.user`
// +kubebuilder:printcolumn:name="Approver",type=string,JSONPath=`.spec.approval.by`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Command",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.status.pod`,priority=1

// ShellJob is one shell command run on a worker of a ShellPool.
type ShellJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ShellJobSpec `json:"spec"`

	// +optional
	Status ShellJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ShellJobList is a list of ShellJobs.
type ShellJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShellJob `json:"items"`
}
