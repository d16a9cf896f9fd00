package bot_test

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// refusedStops fails the stops it is told to with err, as an API server
// that refuses the patch does, and passes the others through.
type refusedStops struct {
	bot.Cluster
	refuse atomic.Int32 // how many stops to refuse
	calls  atomic.Int32
	err    error
}

func (r *refusedStops) As(id identity.Identity) bot.Person {
	return refusedStopsPerson{r.Cluster.As(id), r}
}

// refusedStopsPerson is a refusedStops' admin.
type refusedStopsPerson struct {
	bot.Person
	r *refusedStops
}

func (p refusedStopsPerson) Stop(ctx context.Context, name string) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) {
	p.r.calls.Add(1)
	if p.r.refuse.Add(-1) >= 0 {
		return 0, nil, p.r.err
	}
	return p.Person.Stop(ctx, name)
}

// A .k whose stop the API server refuses says so, leaves the job running
// and its preview not stopping; a later .k stops it. A passing error is
// tried again, StopTries times, before the chat is told.
func TestStopRefusedIsSaid(t *testing.T) {
	gr := schema.GroupResource{Group: shellv1alpha1.GroupVersion.Group, Resource: "shelljobs"}
	for name, tc := range map[string]struct {
		err   error
		calls int32
	}{
		"refused": {apierrors.NewForbidden(gr, "x", nil), 1},
		"passing": {apierrors.NewServiceUnavailable("etcd is down"), bot.StopTries},
	} {
		t.Run(name, func(t *testing.T) {
			stops := &refusedStops{err: tc.err}
			stops.refuse.Store(tc.calls)
			e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { stops.Cluster = c; return stops }})
			since := e.srv.Seq()
			m := e.send(e.admin, e.group, ".a echo tick; sleep 30")
			pv := e.preview(since, e.group, m.ID)
			k := e.send(e.admin, e.group, ".k")
			ans := e.wait(since, "the answer to .k", sendTo(e.group, k.ID))
			if want := texts.StopFailed(1, tc.err); ans.Text != want {
				t.Errorf(".k = %q, want %q", ans.Text, want)
			}
			if n := stops.calls.Load(); n != tc.calls {
				t.Errorf("%d stops asked, want %d", n, tc.calls)
			}
			if sj, err := e.cluster.Job(e.ctx, jobOf(m)); err != nil || sj.Spec.Stop {
				t.Fatalf("after the refused stop: %v, stop %v", err, sj.Spec.Stop)
			}
			for _, ev := range e.srv.Log().After(pv.Seq).Of(faketg.Edit) {
				if ev.MsgID == pv.MsgID && strings.Contains(ev.Text, "stopping") {
					t.Errorf("the preview says %q after a refused stop", ev.Text)
				}
			}
			since = e.srv.Seq()
			k = e.send(e.admin, e.group, ".k")
			if ans := e.wait(since, "the second .k", sendTo(e.group, k.ID)); ans.Text != texts.Stopping(1) {
				t.Errorf("second .k = %q", ans.Text)
			}
			if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "tick\n\n"+texts.StoppedNote(130) {
				t.Errorf("final = %q", fin.Text)
			}
		})
	}
}

// slowFiles hands the job's files over slowly, as a worker far away does.
type slowFiles struct{ bot.Cluster }

func (s slowFiles) GetFiles(ctx context.Context, job string, w io.Writer) error {
	return s.Cluster.GetFiles(ctx, job, writerFunc(func(p []byte) (int, error) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return w.Write(p)
	}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A .k while a job's files are sent stops the sending: the rest are not
// sent, and a .k after it finds nothing running.
func TestStopSendingFiles(t *testing.T) {
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { return slowFiles{c} }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, `.a for i in {1..40}; do head -c 20000 /dev/zero > "$SHELLJOB_OUT/f$i.bin"; done; echo made`)
	// The files answer the command, or its preview if one opened first.
	under := e.finalFile(since, e.group, m.ID).ReplyTo
	k := e.send(e.admin, e.group, ".k")
	if ans := e.wait(since, "the answer to .k", sendTo(e.group, k.ID)); ans.Text != texts.FilesStopped(1) {
		t.Errorf(".k while the files are sent = %q", ans.Text)
	}
	e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
	sent := 0
	for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
		if ev.ReplyTo == under && ev.OK() {
			sent++
		}
	}
	if sent >= 40 {
		t.Errorf("%d files sent after the .k, want fewer than 40", sent)
	}
	k = e.send(e.admin, e.group, ".k")
	if ans := e.wait(since, "the second .k", sendTo(e.group, k.ID)); ans.Text != texts.NoRunning {
		t.Errorf(".k after the sending stopped = %q", ans.Text)
	}
}
