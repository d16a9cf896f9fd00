package bot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/gotd/td/tgerr"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// putFiles puts the replied-to message's files into the held job's
// directory once it has a worker, then lets it start. The put waits for
// the placement: its request would otherwise wait for it too, and the API
// server cuts a files request after its timeout (a minute), however long
// the job is queued.
func (r *run) putFiles(ctx context.Context) {
	b := r.b
	// The files are let go once the worker has them, not when the job ends.
	defer closeFiles(r.files)
	for {
		obj, next := r.watchObj()
		if obj != nil && shelljob.IsFinished(obj) {
			return
		}
		if obj != nil && obj.Status.Pod != "" {
			break
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
	// The tar is streamed from the files as the request reads it.
	pr, pw := io.Pipe()
	tarred := make(chan struct{})
	go func() {
		defer close(tarred)
		pw.CloseWithError(writeTar(pw, r.files))
	}()
	defer func() { <-tarred }()
	defer pr.Close()
	if err := b.cluster.PutFiles(ctx, r.job.Name, pr); err != nil {
		// The command must not run without its files.
		b.cfg.Log.Error(err, "Could not put the input files; stopping the job before it runs", "job", r.job.Name)
		r.setEndNote(texts.InFilesNotPut)
		if _, err := b.stopAs(ctx, r.job, r.job.Owner); err != nil {
			b.cfg.Log.Error(err, "Could not stop a held job; the operator's hold timeout ends it", "job", r.job.Name)
		}
		return
	}
	if err := b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationFilesPut, b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		b.cfg.Log.Error(err, "Could not record the input files", "job", r.job.Name)
	}
	if err := b.as(r.job.Owner).Release(ctx, r.job.Name); err != nil {
		b.cfg.Log.Error(err, "Could not release a held job", "job", r.job.Name)
	}
}

// writeTar writes files to w as a tar, each under its base name.
func writeTar(w io.Writer, files []File) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: path.Base(f.Name), Mode: 0o644, Size: f.len()}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, f.reader()); err != nil {
			return fmt.Errorf("read %s: %w", f.Name, err)
		}
	}
	return tw.Close()
}

// photoExts are the pictures sent as photos; other files go as documents.
var photoExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".webp": true}

// sendFiles streams the files the command left in $SHELLJOB_OUT to the
// chat, each from the job's tar stream straight into its upload, within
// the file limits (outfiles); a note names the files not sent, and counts
// those past the count of files. The attempt is recorded on the job
// first: a bot that dies sending them (a file too big for its memory, say)
// does not try again after its restart, and the note says so. A job whose
// status counts no files costs no call.
func (r *run) sendFiles(ctx context.Context) {
	b := r.b
	obj := r.latest()
	if obj == nil || obj.Status.Pod == "" || !shelljob.MayHaveFiles(obj) {
		return
	}
	if _, tried := obj.Annotations[shellv1alpha1.AnnotationFilesAttempted]; tried {
		r.sendNote(ctx, texts.FilesNotDelivered)
		return
	}
	if err := b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationFilesAttempted, b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		b.cfg.Log.Error(err, "Could not record the files' delivery attempt; not sending them", "job", r.job.Name)
		r.sendNote(ctx, texts.FilesNotRecorded)
		return
	}
	// A .k stops the sending (Job.StopSending).
	ctx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	r.job.SetSending(stopSending)
	defer r.job.SetSending(nil)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(b.cluster.GetFiles(ctx, r.job.Name, pw)) }()
	// Closing the reader ends a GetFiles still writing.
	defer pr.Close()
	inputs := map[string]bool{}
	for _, f := range r.files {
		inputs[path.Base(f.Name)] = true
	}
	limits := b.cfg.Files.Out()
	ignore := func(name string) bool { return inputs[path.Base(name)] }
	var notSent []string
	report, err := outfiles.Read(pr, outfiles.Options{Limits: limits, Ignore: ignore}, func(of outfiles.File, content io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err // a .k stopped the sending
		}
		name := path.Base(of.Name)
		f := File{Name: name, Reader: content, Size: of.Size, Photo: photoExts[strings.ToLower(path.Ext(name))]}
		if _, err := b.tg.To(r.note.Chat).Reply(r.cmdMsg).File(ctx, f); err != nil {
			b.cfg.Log.Error(err, "Could not send a file", "job", r.job.Name, "file", name)
			notSent = append(notSent, texts.OutFileNotSent(name, refusal(err)))
		}
		return nil
	})
	if ctx.Err() != nil {
		return // stopped: the .k's answer says so
	}
	var named []string
	for _, s := range report.Skipped {
		named = append(named, texts.OutFileSkipped(path.Base(s.Name), s, limits))
	}
	// The note names MaxListed files at most, whatever kept them back, to
	// fit in one message; it counts the others.
	named = append(named, notSent...)
	unlisted := report.Unlisted
	if len(named) > outfiles.MaxListed {
		unlisted += len(named) - outfiles.MaxListed
		named = named[:outfiles.MaxListed]
	}
	note := texts.FilesNotSent(named, unlisted, report.OverCount, limits.Count)
	if err != nil {
		b.cfg.Log.Error(err, "Could not get the job's files", "job", r.job.Name)
		note = texts.FilesUnread(note, err)
	}
	if note != "" {
		r.sendNote(ctx, note)
	}
}

// refusal is why Telegram did not take a message: the type of its RPC
// error ("Telegram: MEDIA_EMPTY"), else the error.
func refusal(err error) string {
	if rpc, ok := tgerr.As(err); ok {
		return "Telegram: " + rpc.Type
	}
	return err.Error()
}
