package bot

import (
	"archive/tar"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/command"
	"shelljob.dev/shelljob/bot/delivery"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/bot/longoutput"
	"shelljob.dev/shelljob/bot/pace"
	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// FollowRetry is the wait before following a job's output again after the
// stream broke; the follow resumes from the byte it reached. The wait
// doubles while the streams read nothing, up to FollowRetryMax, so that a
// worker that cannot be reached is not asked once a second.
const (
	FollowRetry    = time.Second
	FollowRetryMax = 30 * time.Second
)

// OutputGrace is how long the final of a job whose worker was lost waits
// for the rest of its output: it can no longer be read to its end, and the
// final goes out with what the bot has.
const OutputGrace = 5 * time.Second

// OutputWait is how long the final of a job that ended on a live worker
// waits for its output to be read to the end. The spool keeps it; only a
// worker that stops answering for this long cuts it.
const OutputWait = 2 * time.Minute

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
	// not run. Under mu: putFiles sets it.
	endNote string
	// complete: the follow read the output to its end.
	complete atomic.Bool

	mu    sync.Mutex
	obj   *shellv1alpha1.ShellJob
	objCh chan struct{} // closed at the next change of obj

	kind   previewKind
	failed bool // the preview could not be opened
	pacer  *pace.Pacer
	last   string
}

// endNoteText is endNote, read under mu.
func (r *run) endNoteText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endNote
}

func (r *run) latest() *shellv1alpha1.ShellJob {
	obj, _ := r.watchObj()
	return obj
}

// watchObj returns the latest job and a channel closed at its next change.
func (r *run) watchObj() (*shellv1alpha1.ShellJob, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.objCh == nil {
		r.objCh = make(chan struct{})
	}
	return r.obj, r.objCh
}

func (r *run) setObj(obj *shellv1alpha1.ShellJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obj = obj
	if r.objCh != nil {
		close(r.objCh)
	}
	r.objCh = make(chan struct{})
}

func (r *run) render() bool { return r.b.cfg.Streaming && r.prefs.Render }

// startChatJob answers .a, .af and .aa in a chat.
func (b *Bot) startChatJob(ctx context.Context, m Message, cmd string, mode shellv1alpha1.ShellJobMode) error {
	if strings.ContainsRune(cmd, 0) {
		return b.reply(ctx, m, texts.NULCommand)
	}
	var files []File
	if m.ReplyTo != 0 {
		fs, err := b.tg.MessageFiles(ctx, m.Chat, m.ReplyTo, b.cfg.Files.InFile)
		if big := (*FileTooBigError)(nil); errors.As(err, &big) {
			closeFiles(fs)
			return b.reply(ctx, m, texts.InFileTooBig(big.Name, big.Size, big.Limit))
		}
		if err != nil {
			closeFiles(fs)
			b.cfg.Log.Error(err, "Could not read the replied-to message's files", "chat", m.Chat.ID, "msg", m.ReplyTo)
			return b.reply(ctx, m, texts.InFileFailed(err))
		}
		files = fs
	}
	note := previewNote{Chat: m.Chat}
	spec := shellv1alpha1.ShellJobSpec{
		Command: cmd,
		Mode:    mode,
		Pool:    b.cfg.Pool,
		Origin: shellv1alpha1.ShellJobOrigin{
			Source:  shellv1alpha1.OriginTelegram,
			User:    strconv.FormatInt(m.From, 10),
			Chat:    m.Chat.ID,
			Topic:   int64(m.Chat.Topic),
			Message: int64(m.ID),
		},
		Hold: len(files) > 0,
	}
	b.stopIfShuttingDown(&spec)
	sj, err := b.cluster.Submit(ctx, shelljob.TelegramName(spec.Origin, m.Date), spec, map[string]string{shellv1alpha1.AnnotationPreview: note.encode()})
	if err != nil {
		closeFiles(files)
	}
	if errors.Is(err, ErrJobExists) {
		b.handled(ctx, sj)
		return nil
	}
	if err != nil {
		return b.reply(ctx, m, submitFailed(err))
	}
	j := b.newJob(sj, jobs.Info{Owner: m.From, Chat: m.Chat.ID, CommandMsg: m.ID, Command: cmd})
	b.cfg.Log.V(1).Info("Job submitted", "job", sj.Name, "number", sj.Status.Number, "mode", mode, "chat", m.Chat.ID, "user", m.From)
	r := &run{b: b, job: j, prefs: b.prefs(ctx, m.From), note: note, cmdMsg: m.ID, files: files}
	b.launch(r)
	return nil
}

// stopIfShuttingDown creates a job that arrives during a shutdown stopped,
// so its command never runs; its final still goes out.
func (b *Bot) stopIfShuttingDown(spec *shellv1alpha1.ShellJobSpec) {
	if b.shuttingDown() {
		spec.Stop, spec.StopReason = true, shellv1alpha1.StopReasonShutdown
	}
}

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
		if _, err := b.stopJob(b.pumpCtx(), r.job, shellv1alpha1.StopReasonShutdown); err != nil {
			b.cfg.Log.Error(err, "Could not stop a job: the bot is going offline", "job", r.job.Name)
		}
	}
	go func() {
		defer b.pumps.Done()
		r.pump(b.pumpCtx())
	}()
}

// HandleGuestQuery answers @bot .a and @bot .k from a guest chat.
func (b *Bot) HandleGuestQuery(ctx context.Context, q GuestQuery) error {
	names, primary := b.nameSet()
	c := command.ParseGuest(q.Text, names)
	if c.Kind == command.None {
		return nil
	}
	if !b.isAdmin(q.From) {
		_, err := b.tg.GuestAnswer(ctx, q.QueryID, texts.NotAvailable)
		return err
	}
	key := "g" + strconv.FormatInt(q.Chat, 10)
	if c.Kind == command.K {
		_, err := b.tg.GuestAnswer(ctx, q.QueryID, b.kill(ctx, 0, q.From, key, 0, c.Arg, "@"+primary+" .k"))
		return err
	}
	if strings.ContainsRune(c.Arg, 0) {
		_, err := b.tg.GuestAnswer(ctx, q.QueryID, texts.NULCommand)
		return err
	}
	gm, err := b.tg.GuestAnswer(ctx, q.QueryID, texts.GuestRunning)
	if err != nil {
		return err
	}
	note := previewNote{Guest: &gm, GuestChat: key, GroupPace: !q.Private}
	spec := shellv1alpha1.ShellJobSpec{
		Command: c.Arg,
		Mode:    shellv1alpha1.ModeFork,
		Pool:    b.cfg.Pool,
		Origin: shellv1alpha1.ShellJobOrigin{
			Source:     shellv1alpha1.OriginTelegram,
			User:       strconv.FormatInt(q.From, 10),
			GuestQuery: strconv.FormatInt(q.QueryID, 10),
		},
	}
	b.stopIfShuttingDown(&spec)
	sj, err := b.cluster.Submit(ctx, shelljob.TelegramName(spec.Origin, q.Date), spec, map[string]string{shellv1alpha1.AnnotationPreview: note.encode()})
	if errors.Is(err, ErrJobExists) {
		b.handled(ctx, sj)
		return nil
	}
	if err != nil {
		return b.tg.EditGuest(ctx, gm, submitFailed(err))
	}
	j := b.newJob(sj, jobs.Info{Owner: q.From, Guest: key, Command: c.Arg})
	b.cfg.Log.V(1).Info("Job submitted", "job", sj.Name, "number", sj.Status.Number, "guestChat", key, "user", q.From)
	b.launch(&run{b: b, job: j, prefs: b.prefs(ctx, q.From), note: note, kind: guestPreview})
	return nil
}

// resume picks up the jobs a previous run of the bot left undelivered.
func (b *Bot) resume(ctx context.Context) error {
	all, err := b.cluster.List(ctx)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for i := range all {
		b.adopt(ctx, &all[i])
	}
	return nil
}

// handled answers a command whose job exists: a restarted bot was sent the
// command again. The job is delivered, followed already (resume took it
// up), or taken up now; it is never created or answered again.
func (b *Bot) handled(ctx context.Context, sj *shellv1alpha1.ShellJob) {
	b.cfg.Log.Info("Command already handled: its job exists", "job", sj.Name)
	if b.registry.Get(sj.Name) == nil {
		b.adopt(ctx, sj)
	}
}

// adopt follows a job that a previous run of the bot left undelivered: its
// preview comes back and its final is delivered.
func (b *Bot) adopt(ctx context.Context, sj *shellv1alpha1.ShellJob) {
	if _, done := sj.Annotations[shellv1alpha1.AnnotationDelivered]; done {
		return
	}
	var note previewNote
	if err := json.Unmarshal([]byte(sj.Annotations[shellv1alpha1.AnnotationPreview]), &note); err != nil {
		b.cfg.Log.Info("Undelivered job without a readable preview note; skipped", "job", sj.Name)
		return
	}
	owner, _ := strconv.ParseInt(sj.Spec.Origin.User, 10, 64)
	r := &run{b: b, prefs: b.prefs(ctx, owner), note: note, cmdMsg: int(sj.Spec.Origin.Message)}
	// The CR's timestamp has whole seconds, fine for a job that started
	// before this bot did; a fresh job times its preview by the clock.
	j := jobs.Info{Owner: owner, Chat: note.Chat.ID, CommandMsg: r.cmdMsg, Command: sj.Spec.Command, Guest: note.GuestChat,
		Created: sj.CreationTimestamp.Time}
	switch {
	case note.Guest != nil:
		r.kind = guestPreview
		j.Chat = 0
	case note.Msg != 0:
		r.kind = editPreview
	case note.Draft != 0:
		r.kind = draftPreview
	}
	r.job = b.newJob(sj, j)
	r.job.SetPreview(note.Msg, note.Draft)
	r.resumed = true
	if sj.Spec.Hold && !shelljob.IsFinished(sj) {
		r.endNote = b.releaseHeld(ctx, sj)
	}
	r.setObj(sj.DeepCopy())
	// The preview shows the output's end, read from the spool; the
	// final reads the whole output there again.
	r.followFrom = max(0, sj.Status.OutputBytes-liveoutput.DefaultPreviewBytes)
	b.cfg.Log.Info("Resuming an undelivered job", "job", sj.Name)
	b.launch(r)
}

// releaseHeld settles a held job that a previous run of the bot left: its
// replied-to files went with that run. A job whose files are in place
// (AnnotationFilesPut) lost only its release and is released; any other
// is stopped before it runs, and the returned note ends its final.
func (b *Bot) releaseHeld(ctx context.Context, sj *shellv1alpha1.ShellJob) string {
	if _, put := sj.Annotations[shellv1alpha1.AnnotationFilesPut]; put {
		if err := b.cluster.Release(ctx, sj.Name); err != nil {
			b.cfg.Log.Error(err, "Could not release a held job; the operator's hold timeout ends it", "job", sj.Name)
		}
		return ""
	}
	if _, _, err := b.cluster.Stop(ctx, sj.Name, shellv1alpha1.StopReasonUser); err != nil {
		b.cfg.Log.Error(err, "Could not stop a held job; the operator's hold timeout ends it", "job", sj.Name)
	}
	return texts.HeldAtRestart
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
		Preview:    r.kind,
		Opened:     r.pacer != nil,
		Failed:     r.failed,
		Resumed:    r.resumed,
		OutputRead: r.buf.Written(liveoutput.Stdout) > 0,
		Complete:   r.complete.Load(),
		Sent:       r.last,
	}
	if r.pacer != nil {
		// Rendered only once the preview shows it.
		s.Text = r.previewText()
		s.Next, s.Heartbeat = r.pacer.Next(), r.pacer.Heartbeat()
	}
	return s
}

// private tells whether the job's chat is a private one; for a guest
// answer, whether it was asked in one.
func (r *run) private() bool {
	if r.kind == guestPreview {
		return !r.note.GroupPace
	}
	return r.note.Chat.Private()
}

func (r *run) previewText() string {
	s := preview.Running
	switch {
	case r.job.State() == jobs.Stopping:
		s = preview.Stopping
	case r.job.Waiting():
		s = preview.Queued
	}
	hint := ""
	if r.kind == guestPreview {
		_, primary := r.b.nameSet()
		hint = fmt.Sprintf(texts.GuestStopHintFormat, primary)
	}
	return preview.Compose(preview.Header(r.job.Number(), s, hint), r.buf.TailText(preview.PreviewUnits, r.render()))
}

func (r *run) stopButtons() [][]Button {
	return [][]Button{{{Text: texts.StopButton, Data: "shk:" + strconv.FormatInt(r.job.Number(), 10)}}}
}

// open shows the preview as kind for the first time, or takes over the
// guest answer or the one a previous run of the bot left.
func (r *run) open(ctx context.Context, kind previewKind) {
	b := r.b
	text := r.previewText()
	chat := r.note.Chat
	if r.kind != noPreview {
		r.pacer = pace.New(b.cfg.Clock, delivery.Pace(kind, r.private()), r.job.Created)
		r.update(ctx, text)
		return
	}
	if kind == draftPreview {
		id := rand.Int64N(1<<62) + 1
		// Known before it shows, so that its Stop finds the job.
		r.job.SetPreview(0, id)
		if err := b.tg.Draft(ctx, chat, id, text); err == nil {
			r.note.Draft = id
			r.opened(ctx, draftPreview, text)
			return
		} else {
			r.job.SetPreview(0, 0)
			b.cfg.Log.V(1).Info("Draft refused; using an edited message", "job", r.job.Name, "error", err.Error())
		}
	}
	id, err := b.tg.SendText(ctx, chat, r.cmdMsg, text, true, r.stopButtons())
	if err != nil {
		b.cfg.Log.Error(err, "Could not send a preview; the final goes out as if there were none", "job", r.job.Name)
		r.failed = true
		return
	}
	r.job.SetPreview(id, 0)
	r.note.Msg = id
	r.opened(ctx, editPreview, text)
}

// opened records the preview of kind that now shows text.
func (r *run) opened(ctx context.Context, kind previewKind, text string) {
	r.kind = kind
	r.pacer = pace.New(r.b.cfg.Clock, delivery.Pace(kind, r.private()), r.job.Created)
	r.pacer.Done(true)
	r.last = text
	r.annotatePreview(ctx)
}

func (r *run) annotatePreview(ctx context.Context) {
	if err := r.b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationPreview, r.note.encode()); err != nil {
		r.b.cfg.Log.Error(err, "Could not record the preview", "job", r.job.Name)
	}
}

// update sends text to the preview and reports whether it worked.
func (r *run) update(ctx context.Context, text string) bool {
	var err error
	switch r.kind {
	case editPreview:
		err = r.b.tg.EditText(ctx, r.note.Chat, r.note.Msg, text, r.stopButtons())
	case draftPreview:
		err = r.b.tg.Draft(ctx, r.note.Chat, r.note.Draft, text)
	case guestPreview:
		err = r.b.tg.EditGuest(ctx, *r.note.Guest, text)
	case noPreview:
		return true
	}
	r.pacer.Done(err == nil)
	if err != nil {
		r.b.cfg.Log.V(1).Info("Preview update failed", "job", r.job.Name, "error", err.Error())
		return false
	}
	r.last = text
	return true
}

// startFollow starts the job's follower in the bot's set, under ctx. It
// returns stop, which cancels the follower and waits until it ended, and
// followed, closed once it ended. A job the set follows already (a second
// pump of it) is not followed again: its final says the output was cut.
func (r *run) startFollow(ctx context.Context) (stop func(), followed <-chan struct{}) {
	f, err := r.b.followers.Start(ctx, r.job.Name, r.follow)
	if err != nil {
		r.b.cfg.Log.Error(err, "The job's output is not followed", "job", r.job.Name)
		none := make(chan struct{})
		close(none)
		return func() {}, none
	}
	return f.Stop, f.Done()
}

// follow copies the job's output into the buffer once it runs, resuming
// after a broken stream, and returns when the output is closed, the job
// ended without running, or ctx ended.
func (r *run) follow(ctx context.Context) {
	// offset counts the bytes the command wrote up to where the stream
	// reached, as the agent does. It is not what the buffer got: a gap
	// in the spool comes as one line in place of the bytes it skipped.
	offset := r.followFrom
	retry := FollowRetry
	for {
		obj, ok := r.placed(ctx)
		if !ok {
			return
		}
		from, fctx, cancel := offset, ctx, context.CancelFunc(func() {})
		var watched sync.WaitGroup
		if !obj.Status.Ran && offset == 0 {
			// Opened as soon as the job is placed, the follow overlaps the
			// start: the agent holds it until the command runs.
			from = agentapi.AwaitStart
			fctx, cancel = context.WithCancel(ctx)
			watched.Go(func() { r.cancelUnlessStarted(fctx, cancel, obj.Status.Pod) })
		}
		reached, err := r.b.cluster.Follow(fctx, r.latest(), from, r.buf.Writer(liveoutput.Stdout))
		moved := fctx.Err() != nil && ctx.Err() == nil
		cancel()
		// The follower ends with the watch it started.
		watched.Wait()
		if reached > offset {
			offset, retry = reached, FollowRetry
		}
		if err == nil {
			r.complete.Store(true)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if moved {
			continue // placed again, or ended without running
		}
		if errors.Is(err, ErrWorkerGone) {
			r.b.cfg.Log.Info("The output can no longer be read: its worker is gone", "job", r.job.Name, "error", err.Error())
			return
		}
		r.b.cfg.Log.V(1).Info("Output stream broke; following again", "job", r.job.Name, "error", err.Error())
		select {
		case <-r.b.cfg.Clock.After(retry):
		case <-ctx.Done():
			return
		}
		retry = min(2*retry, FollowRetryMax)
	}
}

// placed waits until the job has a worker, and tells false if it ended
// without running, or ctx ended, first.
func (r *run) placed(ctx context.Context) (*shellv1alpha1.ShellJob, bool) {
	for {
		obj, next := r.watchObj()
		switch {
		case obj != nil && shelljob.IsFinished(obj) && !obj.Status.Ran:
			return nil, false
		case obj != nil && obj.Status.Pod != "":
			return obj, true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// cancelUnlessStarted cancels a follow that awaits the job's start on pod
// once the job is placed elsewhere (its worker was lost before the start)
// or ends without running.
func (r *run) cancelUnlessStarted(ctx context.Context, cancel context.CancelFunc, pod string) {
	for {
		obj, next := r.watchObj()
		switch {
		case obj == nil:
		case obj.Status.Ran && obj.Status.Pod == pod:
			return
		case obj.Status.Pod != pod || shelljob.IsFinished(obj):
			cancel()
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}

// putFiles puts the replied-to message's files into the held job's
// directory once it has a pod, then lets it start.
func (r *run) putFiles(ctx context.Context) {
	b := r.b
	// The files are let go once the worker has them, not when the job ends.
	defer closeFiles(r.files)
	var pod string
	for {
		obj, next := r.watchObj()
		if obj != nil {
			if shelljob.IsFinished(obj) {
				return
			}
			pod = obj.Status.Pod
		}
		if pod != "" {
			break
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
	// The tar is streamed from the files as the exec reads it.
	pr, pw := io.Pipe()
	tarred := make(chan struct{})
	go func() {
		defer close(tarred)
		pw.CloseWithError(writeTar(pw, r.files))
	}()
	defer func() { <-tarred }()
	defer pr.Close()
	ns := r.latest().Namespace
	if err := b.cluster.PutFiles(ctx, types.NamespacedName{Namespace: ns, Name: pod}, r.job.UID, pr); err != nil {
		// The command must not run without its files.
		b.cfg.Log.Error(err, "Could not put the input files; stopping the job before it runs", "job", r.job.Name)
		r.mu.Lock()
		r.endNote = texts.InFilesNotPut
		r.mu.Unlock()
		if _, err := b.stopJob(ctx, r.job, shellv1alpha1.StopReasonUser); err != nil {
			b.cfg.Log.Error(err, "Could not stop a held job; the operator's hold timeout ends it", "job", r.job.Name)
		}
		return
	}
	if err := b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationFilesPut, b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		b.cfg.Log.Error(err, "Could not record the input files", "job", r.job.Name)
	}
	if err := b.cluster.Release(ctx, r.job.Name); err != nil {
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

// outcome is how the job ended, for its final.
func (r *run) outcome() (code int, ran bool, stop preview.Stop) {
	obj := r.latest()
	code = -1
	if obj == nil {
		return code, false, preview.NotStopped
	}
	if obj.Status.ExitCode != nil {
		code = int(*obj.Status.ExitCode)
	}
	ran = obj.Status.Ran
	if obj.Spec.Stop && shelljob.IsStopped(obj) {
		stop = preview.StoppedByUser
		if obj.Spec.StopReason == shellv1alpha1.StopReasonShutdown {
			stop = preview.StoppedByShutdown
		}
	}
	if !ran && stop == preview.NotStopped {
		ran = true // a start that failed: show what it wrote and its code
	}
	return code, ran, stop
}

// deliver sends the final and the files, then marks the job delivered.
// It waits for room in the finals' memory first, and records the attempt
// before it sends anything: a final that an earlier run of the bot died
// delivering goes out in a small form, without its output or files.
func (r *run) deliver(ctx context.Context) {
	b := r.b
	r.job.MarkEnded()
	code, ran, stop := r.outcome()
	release, err := b.finalMemory.take(ctx, r.finalCost(ran))
	if err != nil {
		return // the bot is going offline: its next run delivers it
	}
	defer release()
	if !r.recordAttempt(ctx) {
		r.sendSmallFinal(ctx, code, ran, stop)
	} else {
		output, note := "", ""
		var long *longoutput.Output
		if ran {
			output, long, note = r.finalOutput(ctx)
		}
		if note == "" {
			note = r.endNoteText()
		}
		if r.kind == guestPreview {
			r.sendGuestFinal(ctx, output, long, code, ran, stop, note)
		} else {
			r.sendFinal(ctx, chatFinal(output, long, code, ran, stop, note))
			if ran {
				r.sendFiles(ctx)
			}
		}
	}
	if err := b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationDelivered, b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		b.cfg.Log.Error(err, "Could not mark a job delivered", "job", r.job.Name)
	}
	b.registry.Finish(r.job)
	b.cfg.Log.V(1).Info("Job delivered", "job", r.job.Name, "number", r.job.Number(), "exitCode", code)
}

// finalCost is what the final holds of the finals' memory while it is
// delivered (finalMemory).
func (r *run) finalCost(ran bool) int64 {
	obj := r.latest()
	switch {
	case !ran:
		return textFinalMemory
	case r.fromSpool(), r.buf.Written(liveoutput.Stdout) > preview.FileChars, obj != nil && shelljob.MayHaveFiles(obj):
		return uploadMemory
	}
	return textFinalMemory
}

// recordAttempt records that the final is being delivered, and tells
// false when an earlier run of the bot recorded it already, or when it
// cannot be recorded: the final must then go out in its small form.
func (r *run) recordAttempt(ctx context.Context) bool {
	if obj := r.latest(); obj != nil {
		if _, tried := obj.Annotations[shellv1alpha1.AnnotationFinalAttempted]; tried {
			r.b.cfg.Log.Info("An earlier run of the bot did not finish delivering this final; sending it without its output", "job", r.job.Name)
			return false
		}
	}
	if err := r.b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationFinalAttempted, r.b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		r.b.cfg.Log.Error(err, "Could not record the final's delivery; sending it without its output", "job", r.job.Name)
		return false
	}
	return true
}

// sendSmallFinal sends the final of a job without its output or files:
// how it ended, and the note that says why.
func (r *run) sendSmallFinal(ctx context.Context, code int, ran bool, stop preview.Stop) {
	note := texts.FinalNotSent
	if r.kind == guestPreview {
		r.sendGuestFinal(ctx, "", nil, code, ran, stop, note)
		return
	}
	r.sendFinal(ctx, chatFinal("", nil, code, ran, stop, note))
	if obj := r.latest(); ran && obj != nil && obj.Status.Pod != "" && shelljob.MayHaveFiles(obj) {
		r.sendNote(ctx, texts.FilesNotDelivered)
	}
}

// fromSpool tells whether the final reads the output again from the
// spool: the follow read it to its end, but the bot did not keep all of
// it.
func (r *run) fromSpool() bool {
	return r.complete.Load() && (r.followFrom > 0 || !r.buf.KeptAll())
}

// finalOutput is the output the final shows, rendered when the caller
// renders, and the note that says why it may be cut. An output read again
// from the spool that is longer than keptBytes comes as long, measured: the
// final's file reads the spool once more.
func (r *run) finalOutput(ctx context.Context) (output string, long *longoutput.Output, note string) {
	note, _ = workerNote(r.latest())
	if !r.complete.Load() {
		return r.keptText(), nil, cmp.Or(note, texts.OutputCut)
	}
	if !r.fromSpool() {
		return r.buf.FinalText(r.render()), nil, note
	}
	obj := r.latest()
	long, err := longoutput.Measure(func(w io.Writer) error {
		return r.b.cluster.FollowText(ctx, obj, agentapi.TextModeOf(r.render()), w)
	})
	if err == nil && long.Size() <= keptBytes {
		output, err = long.String()
		long = nil
	}
	if err != nil {
		r.b.cfg.Log.Error(err, "Could not read the output again from the spool; the final shows what the bot kept", "job", r.job.Name)
		return r.keptText(), nil, cmp.Or(note, texts.OutputCut)
	}
	return output, long, note
}

// keptText is what the bot kept of the output: its start and its end, with
// the not-kept line between them.
func (r *run) keptText() string {
	text := r.buf.FinalText(r.render())
	if r.followFrom > 0 {
		text = agentapi.GapLine(r.followFrom) + text
	}
	return text
}

// finalText is a chat final as it goes out: a short one as text; a long one
// as the message that shows its end and the .txt file that holds it whole.
type finalText struct {
	text string
	long bool
	head string
	file func() File
}

// chatFinal is the final of a job (preview.Final), built from output, or
// from long when set.
func chatFinal(output string, long *longoutput.Output, code int, ran bool, stop preview.Stop, note string) finalText {
	if long == nil {
		final := preview.Final(output, code, ran, stop, note)
		f := finalText{text: final, long: preview.IsLong(final)}
		if f.long {
			f.head = preview.LongHead(final)
			f.file = func() File { return File{Name: texts.OutputFileName, Data: []byte(final)} }
		}
		return f
	}
	end := preview.LongFinalEnd(code, stop, note)
	return finalText{long: true, head: preview.LongHead(long.Tail(preview.MessageUnits) + end), file: longFile(long, end)}
}

// longFile is the .txt file of a long output followed by end, read from
// the spool as it is uploaded; its Close ends that read.
func longFile(long *longoutput.Output, end string) func() File {
	return func() File {
		body := long.Reader()
		return File{
			Name: texts.OutputFileName,
			Reader: struct {
				io.Reader
				io.Closer
			}{io.MultiReader(body, strings.NewReader(end)), body},
			Size: long.Size() + int64(len(end)),
		}
	}
}

// sendOutputFile sends the final's .txt file in reply to message reply.
func (r *run) sendOutputFile(ctx context.Context, reply int, final finalText) (int, error) {
	f := final.file()
	defer f.Close()
	return r.b.tg.SendFile(ctx, r.note.Chat, reply, f)
}

// workerNote is the note a final ends with when the job ended because
// of its worker (lost, evicted, out of memory), and whether the worker
// may have gone with the output.
func workerNote(obj *shellv1alpha1.ShellJob) (note string, gone bool) {
	if obj == nil {
		return "", false
	}
	c := meta.FindStatusCondition(obj.Status.Conditions, shellv1alpha1.ShellJobFinished)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", false
	}
	switch c.Reason {
	case shellv1alpha1.ShellJobFinishedReasonHoldTimedOut:
		return texts.WorkerEnded(c.Message), false
	case shellv1alpha1.ShellJobFinishedReasonWorkerLost:
		return texts.WorkerLost, true
	case shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, shellv1alpha1.ShellJobFinishedReasonOutOfMemory:
		return texts.WorkerEnded(c.Message), true
	}
	return "", false
}

// sendGuestFinal edits a guest answer into its final. A long one becomes
// the output.txt document under a caption with the output's end; if that
// fails, the text cut to fit one message goes out as for a short one.
func (r *run) sendGuestFinal(ctx context.Context, output string, long *longoutput.Output, code int, ran bool, stop preview.Stop, note string) {
	b := r.b
	caption, file, ok := "", File{}, false
	if long != nil {
		output, ok = long.Tail(preview.MessageUnits), true
		caption = preview.GuestCaption(output, code, stop, note)
		file = longFile(long, preview.GuestLongEnd(code, stop, note))()
		defer file.Close()
	} else if c, f, isLong := preview.GuestLong(output, code, ran, stop, note); isLong {
		caption, file, ok = c, File{Name: texts.OutputFileName, Data: []byte(f)}, true
	}
	if ok {
		err := b.tg.EditGuestFile(ctx, *r.note.Guest, caption, file)
		if err == nil {
			return
		}
		b.cfg.Log.Error(err, "Could not attach the output file to a guest answer; sending its end as text", "job", r.job.Name)
	}
	if err := b.tg.EditGuest(ctx, *r.note.Guest, preview.Guest(output, code, ran, stop, note)); err != nil {
		b.cfg.Log.Error(err, "Could not send a guest final", "job", r.job.Name)
	}
}

// sendPlain sends a final as before live output: a reply to the command,
// as text, or as the .txt file from preview.FileChars characters on.
// sync, when set, is called with the text before a text reply.
func (r *run) sendPlain(ctx context.Context, final finalText, sync func(string)) (int, error) {
	chat := r.note.Chat
	if final.long {
		return r.sendOutputFile(ctx, r.cmdMsg, final)
	}
	if sync != nil {
		sync(final.text)
	}
	return r.b.tg.SendText(ctx, chat, r.cmdMsg, final.text, false, nil)
}

// sendFinal delivers a chat job's final, by the caller's final mode.
func (r *run) sendFinal(ctx context.Context, final finalText) {
	b := r.b
	chat := r.note.Chat
	logErr := func(err error, what string) {
		if err != nil {
			b.cfg.Log.Error(err, what, "job", r.job.Name)
		}
	}
	syncDraft := func(text string) {
		logErr(b.tg.Draft(ctx, chat, r.note.Draft, text), "Could not send the sync draft")
	}
	// text is the message that stands for the final.
	text := final.text
	if final.long {
		text = final.head
	}
	switch {
	case r.kind == noPreview:
		_, err := r.sendPlain(ctx, final, nil)
		logErr(err, "Could not send a final")
	case r.prefs.Final == settings.NewReply && r.kind == draftPreview:
		_, err := r.sendPlain(ctx, final, syncDraft)
		logErr(err, "Could not send a final")
	case r.prefs.Final == settings.NewReply:
		_, err := r.sendPlain(ctx, final, nil)
		logErr(err, "Could not send a final")
		if err := b.tg.Delete(ctx, chat, r.note.Msg); err != nil {
			logErr(b.tg.EditText(ctx, chat, r.note.Msg, texts.FinishedBelow, nil), "Could not remove a preview")
		}
	case r.kind == draftPreview:
		syncDraft(text)
		id, err := b.tg.SendText(ctx, chat, r.cmdMsg, text, false, nil)
		logErr(err, "Could not send a final")
		if err == nil && final.long {
			_, err := r.sendOutputFile(ctx, id, final)
			logErr(err, "Could not send the output file")
		}
	default: // an edited preview becomes the final
		if err := b.tg.EditText(ctx, chat, r.note.Msg, text, nil); err != nil {
			b.cfg.Log.V(1).Info("Could not edit the preview into the final; sending it anew", "job", r.job.Name, "error", err.Error())
			_, err := r.sendPlain(ctx, final, nil)
			logErr(err, "Could not send a final")
			logErr(b.tg.Delete(ctx, chat, r.note.Msg), "Could not delete a preview")
			return
		}
		if final.long {
			_, err := r.sendOutputFile(ctx, r.note.Msg, final)
			logErr(err, "Could not send the output file")
		}
	}
}

// photoExts are the pictures sent as photos; other files go as documents.
var photoExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".webp": true}

// sendFiles streams the files the command left in $SHELLJOB_OUT to the
// chat, each from the agent's tar stream straight into its upload, within
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
		return
	}
	// A .k stops the sending (Job.StopSending).
	ctx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	r.job.SetSending(stopSending)
	defer r.job.SetSending(nil)
	pr, pw := io.Pipe()
	pod := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Status.Pod}
	go func() { pw.CloseWithError(b.cluster.GetFiles(ctx, pod, r.job.UID, pw)) }()
	// Closing the reader ends a GetFiles still writing.
	defer pr.Close()
	inputs := map[string]bool{}
	for _, f := range r.files {
		inputs[path.Base(f.Name)] = true
	}
	limits := b.cfg.Files.Out()
	ignore := func(name string) bool { return inputs[path.Base(name)] }
	report, err := outfiles.Read(pr, outfiles.Options{Limits: limits, Ignore: ignore}, func(of outfiles.File, content io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err // a .k stopped the sending
		}
		name := path.Base(of.Name)
		f := File{Name: name, Reader: content, Size: of.Size, Photo: photoExts[strings.ToLower(path.Ext(name))]}
		if _, err := b.tg.SendFile(ctx, r.note.Chat, r.cmdMsg, f); err != nil {
			b.cfg.Log.Error(err, "Could not send a file", "job", r.job.Name, "file", name)
		}
		return nil
	})
	if ctx.Err() != nil {
		return // stopped: the .k's answer says so
	}
	if err != nil {
		b.cfg.Log.Error(err, "Could not get the job's files", "job", r.job.Name)
	}
	var named []string
	for _, s := range report.Skipped {
		named = append(named, texts.OutFileSkipped(path.Base(s.Name), s, limits))
	}
	if note := texts.FilesNotSent(named, report.Unlisted, report.OverCount, limits.Count); note != "" {
		r.sendNote(ctx, note)
	}
}

// sendNote replies to the command with text.
func (r *run) sendNote(ctx context.Context, text string) {
	if _, err := r.b.tg.SendText(ctx, r.note.Chat, r.cmdMsg, text, false, nil); err != nil {
		r.b.cfg.Log.Error(err, "Could not send a note", "job", r.job.Name)
	}
}

// submitFailed answers a command whose job could not be created: in words
// when the namespace's ShellJob quota is full, else with the error.
func submitFailed(err error) string {
	if q, ok := shelljob.QuotaFull(err); ok && q.Limit >= 0 {
		return texts.QuotaFull(q.Limit)
	}
	return fmt.Sprintf(texts.SubmitFailed, err)
}
