package bot_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/shelljob"
)

// countedFiles makes each ended job's status say files, in place of what
// the operator recorded (nil: as from an older agent), and counts the
// GetFiles calls.
type countedFiles struct {
	bot.Cluster
	files    *shellv1alpha1.ShellJobFiles
	getFiles atomic.Int32
}

func (c *countedFiles) Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error {
	return c.Cluster.Watch(ctx, name, func(j *shellv1alpha1.ShellJob) {
		if shelljob.IsFinished(j) {
			j = j.DeepCopy()
			j.Status.Files = c.files
		}
		fn(j)
	})
}

func (c *countedFiles) GetFiles(ctx context.Context, pod types.NamespacedName, job string, w io.Writer) error {
	c.getFiles.Add(1)
	return c.Cluster.GetFiles(ctx, pod, job, w)
}

// The bot asks for a job's files only when its status counts some, or
// counts none because its agent did not say.
func TestFilesFetchedOnlyIfAny(t *testing.T) {
	for name, tc := range map[string]struct {
		files *shellv1alpha1.ShellJobFiles
		calls int32
	}{
		"none":        {files: &shellv1alpha1.ShellJobFiles{}, calls: 0},
		"some":        {files: &shellv1alpha1.ShellJobFiles{Count: 1, Bytes: 5}, calls: 1},
		"older agent": {calls: 1},
	} {
		t.Run(name, func(t *testing.T) {
			counted := &countedFiles{files: tc.files}
			e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { counted.Cluster = c; return counted }})
			since := e.srv.Seq()
			command := ".a echo hi"
			if tc.calls > 0 {
				command += `; echo made > "$SHELLJOB_OUT/out.txt"`
			}
			m := e.send(e.admin, e.group, command)
			if ev := e.wait(since, "the final", sendTo(e.group, m.ID)); ev.Text != "hi" {
				t.Errorf("final = %q", ev.Text)
			}
			e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
			if n := counted.getFiles.Load(); n != tc.calls {
				t.Errorf("%d GetFiles calls, want %d", n, tc.calls)
			}
			sj, err := e.cluster.Job(e.ctx, jobOf(m))
			if err != nil {
				t.Fatal(err)
			}
			if _, tried := sj.Annotations[shellv1alpha1.AnnotationFilesAttempted]; tried != (tc.calls > 0) {
				t.Errorf("files attempt recorded: %v, want %v", tried, tc.calls > 0)
			}
			var uploads int
			for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
				if ev.Media != nil && ev.Media.Filename == "out.txt" {
					uploads++
				}
			}
			if want := int(tc.calls); uploads != want {
				t.Errorf("out.txt sent %d times, want %d", uploads, want)
			}
		})
	}
}
