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

// The subresources of a ShellJob in this group, each under
// /apis/stream.shelljob.dev/v1alpha1/namespaces/NS/shelljobs/NAME/ and
// .../myshelljobs/NAME/: two resources that address the same ShellJob
// NAME, and differ in who may use them. The API server authorizes each
// request by RBAC on its resource before it proxies it here, so a user
// who may not read every job needs a resource of their own to be let
// through at all.
const (
	// Resource reaches any job of the namespace, as RBAC allows: get on
	// shelljobs/log reads every job's output, as get on pods/log does.
	Resource = "shelljobs"
	// OwnResource reaches the caller's own jobs alone: RBAC lets the
	// request through, then the server allows it only when the caller
	// owns the job (its spec.origin.user is theirs) and may still create
	// ShellJobs in its namespace. Its subresources are Resource's.
	OwnResource = "myshelljobs"
	// SubresourceLog is the job's output: GET, with ShellJobLogOptions.
	// RBAC: get on shelljobs/log (or myshelljobs/log). Its name, as
	// attach's, is on the API server's list of long-running
	// subresources, which it does not cut after its request timeout.
	SubresourceLog = "log"
	// SubresourceFiles is the job's $SHELLJOB_OUT as a tar stream: GET
	// reads it (get on shelljobs/files), with ShellJobFilesOptions; PUT or
	// POST puts a tar stream into a held job that has not started (update
	// or create on shelljobs/files).
	SubresourceFiles = "files"
	// SubresourceAttach is a terminal on a console job: GET (WebSocket) or
	// POST (SPDY), upgraded as pods/attach is, with
	// ShellJobAttachOptions. RBAC: create on shelljobs/attach, whichever
	// method carries the upgrade.
	SubresourceAttach = "attach"
)

// TextMode is how a log with Text shows the output, as its final does.
// +enum
type TextMode string

const (
	// TextEscaped: each byte that is not UTF-8 as a \xNN escape.
	TextEscaped TextMode = "escaped"
	// TextRendered: escaped, then rendered as a terminal shows it.
	TextRendered TextMode = "rendered"
)

// +kubebuilder:object:root=true

// ShellJobLogOptions are the query parameters of a ShellJob's log, as
// PodLogOptions are of a pod's.
type ShellJobLogOptions struct {
	metav1.TypeMeta `json:",inline"`

	// Offset is the byte of the output to start from, counted as the
	// command wrote it (status.outputBytes counts the same), whether or
	// not the worker kept it: a reader whose stream was cut resumes from
	// the offset it reached. Defaults to 0.
	// +optional
	Offset int64 `json:"offset,omitempty"`

	// Follow streams the output live until it is closed (the job ended).
	// A job that has not started yet is waited for. Without it, the
	// output written so far is returned, up to what status.outputBytes
	// counts for a running job.
	// +optional
	Follow bool `json:"follow,omitempty"`

	// Framed writes the agent's framed follow stream (a header line
	// "shelljob-follow 1", then "d N", "g N", "s N" frames and the
	// closing "e OFFSET"), with an empty "d 0" frame every 10 s as a
	// keepalive: a reader tells output from the lines that stand for
	// what was not kept, tells a silent command from a dead stream, and
	// knows the offset to resume from. A stream that ends before its "e"
	// frame was cut. Without it, the output's bytes come as they are,
	// with a line in place of what was not kept, for kubectl get --raw
	// and curl.
	// +optional
	Framed bool `json:"framed,omitempty"`

	// AwaitStart waits until the job is placed on a worker and started,
	// then follows it from 0: a client may open its follow right after
	// it created the job. It implies Follow; Offset must be 0.
	// +optional
	AwaitStart bool `json:"awaitStart,omitempty"`

	// Exit, with Framed, puts the job's exit in an "x N" frame just
	// before "e": N bytes of JSON, the worker's agent's record of how the
	// command ended (its exitCode, the signals sent to it, the files it
	// left, ...), so that a reader learns it with the output's end, before
	// the job's status says it. The frame comes when the worker's agent
	// tells it: a reader whose stream has none reads the job's status.
	// +optional
	Exit bool `json:"exit,omitempty"`

	// Deliver, with Exit, through myshelljobs (the caller's own job),
	// marks the job delivered (the shell.shelljob.dev/delivered
	// annotation) once its output went out to its "e" frame and its
	// status records its end, when the "x" frame counts no files in
	// $SHELLJOB_OUT: a reader that asked need not write the mark after
	// what it read. A job that left files is not marked: its reader
	// fetches them, then marks it.
	// +optional
	Deliver bool `json:"deliver,omitempty"`

	// Text returns the job's output from its start as its final shows
	// it, once the output is closed, made on the worker: "escaped" or
	// "rendered". With Framed, it comes in frames under the header line
	// "shelljob-text 1", keepalives included. A job that has not started
	// yet is waited for. Offset must be 0; a cut text is read again from
	// its start.
	// +optional
	Text TextMode `json:"text,omitempty"`
}

// +kubebuilder:object:root=true

// ShellJobFilesOptions are the query parameters of a GET of a ShellJob's
// files.
type ShellJobFilesOptions struct {
	metav1.TypeMeta `json:",inline"`

	// Offset is the byte of the files' tar stream to start from. The tar
	// stream of a job that has ended is the same at every read (the same
	// entries, in the same order, with the same headers), so that a reader
	// whose stream was cut (the API server ends a files request after its
	// request timeout) resumes from the offset it reached. Past 0, only
	// for a job that has ended. Defaults to 0.
	// +optional
	Offset int64 `json:"offset,omitempty"`
}

// +kubebuilder:object:root=true

// ShellJobAttachOptions are the query parameters of a console job's
// attach, as PodAttachOptions are of a pod's.
type ShellJobAttachOptions struct {
	metav1.TypeMeta `json:",inline"`

	// Stdin passes the caller's stdin to the console.
	// +optional
	Stdin bool `json:"stdin,omitempty"`

	// Stdout passes the console's output to the caller.
	// +optional
	Stdout bool `json:"stdout,omitempty"`

	// Stderr passes the attach's own errors to the caller on a stream of
	// their own; with TTY, they come on stdout.
	// +optional
	Stderr bool `json:"stderr,omitempty"`

	// TTY says that the caller's stdin is a terminal: its size goes to
	// the console, and resizes follow.
	// +optional
	TTY bool `json:"tty,omitempty"`
}
