package bot

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/delivery"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/bot/pace"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/shelljob"
)

// keptBytes is how much of a job's output start the bot keeps while it
// runs, when the output memory (Config.OutputMemory) has room: a final whose
// output was kept whole is built from memory; another is read again from the
// spool, the one place where output is capped (DESIGN.md, step 4).
const keptBytes = 64 << 10

// previewKind is how a job's preview shows.
type previewKind = delivery.Kind

const (
	noPreview    = delivery.NoPreview
	editPreview  = delivery.EditPreview
	draftPreview = delivery.DraftPreview
	guestPreview = delivery.GuestPreview
)

// resync is the longest a pump waits without deciding again, as a
// controller's resync period.
const resync = time.Hour

// run is one job's pump: it follows the job and its output, shows the
// preview, and delivers the final and the files.
type run struct {
	b     *Bot
	job   *jobs.Job
	prefs settings.Prefs
	note  previewNote
	// cmdMsg is the command message (chat jobs).
	cmdMsg int
	// files go into the job's directory before it runs (spec.hold).
	files []File
	// buf holds the preview's window, and the first keptBytes (as the
	// output memory allows) and the last bytes the follow read.
	buf *liveoutput.Output
	// followFrom is where the follow starts: past 0 for a resumed job,
	// whose preview shows the output's end at once.
	followFrom int64
	// resumed: the job was picked up after a restart of the bot.
	resumed bool
	// endNote ends the final when nothing else does: why the command did
	// not run. putFiles may set it.
	endNote atomic.Pointer[string]
	// complete: the follow read the output to its end.
	complete atomic.Bool
	// obj is the latest ShellJob, as the watch sees it.
	obj latestJob
	// pv is the preview.
	pv previewState
	// approval is the approval message's state (its place is in note).
	approval approvalState
}

// preview is what a pump knows of its job's preview.
type previewState struct {
	kind   previewKind
	failed bool // it could not be opened
	pacer  *pace.Pacer
	last   string // what it shows
}

// setEndNote sets the note the final ends with when nothing else says why.
func (r *run) setEndNote(note string) { r.endNote.Store(&note) }

// endNoteText is the note setEndNote set, "" for none.
func (r *run) endNoteText() string {
	if p := r.endNote.Load(); p != nil {
		return *p
	}
	return ""
}

func (r *run) latest() *shellv1alpha1.ShellJob { return r.obj.get() }

// watchObj returns the latest job and a channel closed at its next change.
func (r *run) watchObj() (*shellv1alpha1.ShellJob, <-chan struct{}) { return r.obj.watch() }

func (r *run) setObj(obj *shellv1alpha1.ShellJob) { r.obj.set(obj) }

// latestJob is a ShellJob that changes, and says when.
type latestJob struct {
	mu  sync.Mutex
	obj *shellv1alpha1.ShellJob
	ch  chan struct{} // closed at the next change of obj
}

func (l *latestJob) get() *shellv1alpha1.ShellJob {
	obj, _ := l.watch()
	return obj
}

// watch returns the job and a channel closed at its next change.
func (l *latestJob) watch() (*shellv1alpha1.ShellJob, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
	}
	return l.obj, l.ch
}

func (l *latestJob) set(obj *shellv1alpha1.ShellJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.obj = obj
	if l.ch != nil {
		close(l.ch)
	}
	l.ch = make(chan struct{})
}

func (r *run) render() bool { return r.b.cfg.Streaming && r.prefs.Render }

// newJob registers the job of sj, created now unless j says when.
func (b *Bot) newJob(sj *shellv1alpha1.ShellJob, j jobs.Info) *jobs.Job {
	j.Name, j.UID = sj.Name, string(sj.UID)
	if j.Created.IsZero() {
		j.Created = b.cfg.Clock.Now()
	}
	job := jobs.New(j)
	job.Observe(sj)
	return job
}

// launch registers r's job and starts its pump.
func (b *Bot) launch(r *run) {
	r.buf = liveoutput.New(liveoutput.Options{HeadBytes: keptBytes, TailBytes: liveoutput.DefaultPreviewBytes, Budget: b.outputMemory})
	b.pumps.Add(1)
	if b.registry.Register(r.job) {
		// Created as the shutdown began: stopped before it runs.
		if _, err := b.stopOffline(b.pumpCtx(), r.job); err != nil {
			b.cfg.Log.Error(err, "Could not stop a job: the bot is going offline", "job", r.job.Name)
		}
	}
	go func() {
		defer b.pumps.Done()
		r.pump(b.pumpCtx())
	}()
}

// pump runs the job to its delivery.
func (r *run) pump(ctx context.Context) {
	b := r.b
	// Nothing of the job outlives its pump: the bot's Wait means it.
	var wg sync.WaitGroup
	defer closeFiles(r.files)
	defer r.buf.Release()
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan struct{})
	wg.Go(func() {
		var once sync.Once
		err := b.cluster.Watch(ctx, r.job.Name, func(obj *shellv1alpha1.ShellJob) {
			r.setObj(obj)
			r.job.Observe(obj)
			if shelljob.IsFinished(obj) {
				once.Do(func() { close(ended) })
			}
		})
		if err == nil {
			once.Do(func() { close(ended) })
		}
	})
	stopFollow, followed := r.startFollow(ctx)
	defer stopFollow()
	if len(r.files) > 0 {
		wg.Go(func() { r.putFiles(ctx) })
	}
	// The job is over once its phase is final and its output is read, or
	// OutputGrace after its phase is final when its worker was lost (its
	// output cannot be read to its end), OutputWait otherwise.
	over := make(chan struct{})
	wg.Go(func() {
		select {
		case <-ended:
		case <-ctx.Done():
			return
		}
		wait := OutputWait
		if _, gone := workerNote(r.latest()); gone {
			wait = OutputGrace
		}
		grace := b.cfg.Clock.NewTimer(wait)
		defer grace.Stop()
		select {
		case <-followed:
		case <-grace.C():
			stopFollow()
			<-followed
		case <-ctx.Done():
			return
		}
		close(over)
	})

	// The pump reconciles: it applies each decision, and decides again
	// after a change, or when the decision's time comes.
	isOver := false
	for {
		r.syncApproval(ctx)
		now := b.cfg.Clock.Now()
		s := r.state(now, isOver)
		d := delivery.Decide(s)
		switch d.Action {
		case delivery.Final:
			r.deliver(ctx)
			return
		case delivery.Open:
			r.open(ctx, d.Kind)
			continue
		case delivery.Edit, delivery.Draft:
			r.update(ctx, s.Text)
			continue
		case delivery.Wait:
		}
		wait := resync
		if !d.Until.IsZero() {
			wait = d.Until.Sub(now)
		}
		timer := b.cfg.Clock.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-over:
			isOver = true
		case <-r.job.Changed():
		case <-r.buf.Changed():
		case <-timer.C():
		}
		timer.Stop()
	}
}

// state is what the delivery decision needs of the job now; over: the job
// is over (its final is due).
func (r *run) state(now time.Time, over bool) delivery.State {
	obj := r.latest()
	s := delivery.State{
		Now:        now,
		Created:    r.job.Created,
		Number:     r.job.Number(),
		Ended:      obj != nil && shelljob.IsFinished(obj),
		Over:       over,
		Streaming:  r.b.cfg.Streaming,
		Private:    r.private(),
		Prefs:      r.prefs,
		Preview:    r.pv.kind,
		Opened:     r.pv.pacer != nil,
		Failed:     r.pv.failed,
		Resumed:    r.resumed,
		OutputRead: r.buf.Written(liveoutput.Stdout) > 0,
		Complete:   r.complete.Load(),
		Sent:       r.pv.last,
	}
	if r.pv.pacer != nil {
		// Rendered only once the preview shows it.
		s.Text = r.previewText()
		s.Next, s.Heartbeat = r.pv.pacer.Next(), r.pv.pacer.Heartbeat()
	}
	return s
}
