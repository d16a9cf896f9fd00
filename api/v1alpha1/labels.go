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

// Labels the operator puts on worker pods.
const (
	// LabelPool names the ShellPool of a worker pod.
	LabelPool = "shell.shelljob.dev/pool"
	// LabelRevision is the pool revision of a worker pod.
	LabelRevision = "shell.shelljob.dev/revision"
	// LabelWorker is the index of a worker in its pool.
	LabelWorker = "shell.shelljob.dev/worker"
	// LabelPoolNamespace is the namespace of the ShellPool of a worker pod:
	// workers may live in a namespace of their own.
	LabelPoolNamespace = "shell.shelljob.dev/pool-namespace"
	// LabelPoolUID is the UID of the ShellPool that made a worker pod. It
	// stands for an owner reference, which cannot cross namespaces.
	LabelPoolUID = "shell.shelljob.dev/pool-uid"
)

// Labels the operator puts on a settled ShellJob: one that has finished and
// that nothing waits for any more (its final was delivered, or it never
// ran and nobody delivers one). The operator's cache leaves settled jobs
// out, so that thousands of finished jobs cost it no memory, and it
// deletes each once the time LabelExpires names has passed. Only the
// operator may set or change them (an admission policy of the chart): a
// job labelled settled before its end would leave the operator's sight.
const (
	// LabelExpires holds when a settled job expires and is deleted, in
	// Unix seconds.
	LabelExpires = "shell.shelljob.dev/expires"
	// LabelNumber holds a settled job's number (status.number), so that
	// the job counter, if lost, starts again above it.
	LabelNumber = "shell.shelljob.dev/number"
)

// Annotations the clients (bot, CLI) put on the ShellJobs they created. They
// are the clients' own bookkeeping: the operator never writes them.
const (
	// AnnotationDelivered is set, to an RFC 3339 time, once the job's final
	// and files reached the user. The operator reads it: a finished job's
	// TTL counts from it, and a retired worker waits for it.
	AnnotationDelivered = "shell.shelljob.dev/delivered"
	// AnnotationPreview holds where the job's live preview is shown, so a
	// restarted bot can continue it.
	AnnotationPreview = "shell.shelljob.dev/preview"
	// AnnotationFinalAttempted is set, to an RFC 3339 time, before the bot
	// starts to deliver the job's final: a bot that died delivering it
	// (an output that took it down, say) finds it after its restart and
	// sends a small final in its place, never the one it died on.
	AnnotationFinalAttempted = "shell.shelljob.dev/final-attempted"
	// AnnotationFilesAttempted is set, to an RFC 3339 time, before the bot
	// sends the job's $SHELLJOB_OUT files: a bot that died sending them
	// finds it after its restart and does not try again.
	AnnotationFilesAttempted = "shell.shelljob.dev/files-attempted"
	// AnnotationFilesPut is set, to an RFC 3339 time, once the bot put a
	// held job's input files into its directory: a restarted bot releases
	// such a job, and stops one without it.
	AnnotationFilesPut = "shell.shelljob.dev/files-put"
	// AnnotationPreferredWorker names the worker pod the client would like
	// the job to run on. The operator places a Fork or Console job there
	// when that worker is free and not the pool's stateful worker, and
	// ignores it otherwise. Neither the bot nor `kubectl shelljob` sets
	// it: their follows go through the stream API, which reaches every
	// worker alike.
	AnnotationPreferredWorker = "shell.shelljob.dev/preferred-worker"
)

// DefaultPool is the pool a job runs on when it names none.
const DefaultPool = "shell"
