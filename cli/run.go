package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/termrender"
	"shelljob.dev/shelljob/internal/texts"
)

// Exit codes beyond the command's own.
const (
	// ExitTimeout is the exit code after the idle timeout, as timeout(1)
	// uses.
	ExitTimeout = 124
	// ExitInterrupted is the exit code of a detach or a job stopped before
	// it ran: 128+SIGINT.
	ExitInterrupted = 130
	// ExitNotApproved is the exit code of a job denied, or not approved in
	// time: it never ran, as a shell's "cannot execute".
	ExitNotApproved = 126
)

// outputWait is the longest exec waits, once its job has ended, for the
// rest of the job's output: the stream API resumes a cut follow, and a
// worker that stops answering must not hold the terminal.
const outputWait = 2 * time.Minute

// jobRequest is a job to run.
type jobRequest struct {
	Command string
	Mode    shellv1alpha1.ShellJobMode
	Pool    string
	// Timeout is the idle timeout; 0 for none.
	Timeout time.Duration
}

// runner runs jobs from the terminal: it creates each, streams its output
// live, saves its files, and returns its exit code. Ctrl-C stops the job;
// a second one detaches.
type runner struct {
	cluster *Cluster
	genericiooptions.IOStreams
	// interrupts delivers Ctrl-C.
	interrupts <-chan os.Signal
	// render applies the terminal renderer to the output.
	render bool
	// outputDir is where the files go, "" for ./shelljob-out/<job>.
	outputDir string
	// clock times the delivery marks.
	clock clock.PassiveClock
	// fileLimits cap the files saved; zero fields take outfiles'
	// defaults, the bot's.
	fileLimits outfiles.Limits

	// user is the job origin's user, once known: the API server fills it
	// in (the origin-user policy), or a SelfSubjectReview tells it.
	user string
}

// newJob is the ShellJob of req, not yet created.
func (r *runner) newJob(req jobRequest) (*shellv1alpha1.ShellJob, error) {
	if len(req.Command) > maxCommand {
		return nil, errCommandTooLong
	}
	if strings.TrimSpace(req.Command) == "" {
		return nil, errors.New("the command is empty")
	}
	sj := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-", Namespace: r.cluster.Namespace},
		Spec: shellv1alpha1.ShellJobSpec{
			Command: req.Command,
			Mode:    req.Mode,
			Pool:    req.Pool,
			Origin:  shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: r.user},
		},
	}
	if req.Timeout > 0 {
		s := int64(max(1, (req.Timeout+time.Second-1)/time.Second))
		sj.Spec.IdleTimeoutSeconds = &s
	}
	return sj, nil
}

// create makes the ShellJob of req (createJob).
func (r *runner) create(ctx context.Context, req jobRequest) (*shellv1alpha1.ShellJob, error) {
	sj, err := r.newJob(req)
	if err != nil {
		return nil, err
	}
	return r.createJob(ctx, sj)
}

// createJob creates sj. Its origin's user is left for the API server to
// fill in (config/policy, origin-user.yaml), so that no request goes
// before the create. A cluster without that policy refuses the job (the
// origin policy): the CLI then asks who it is and names the user itself.
// Either way the cluster checks it: the CLI's own idea is not trusted.
func (r *runner) createJob(ctx context.Context, sj *shellv1alpha1.ShellJob) (*shellv1alpha1.ShellJob, error) {
	var created *shellv1alpha1.ShellJob
	create := func() (err error) {
		created, err = r.cluster.Jobs.Create(ctx, sj, metav1.CreateOptions{})
		return err
	}
	err := shelljob.CreateQuotaCounted(ctx, create)
	if err != nil && r.user == "" && needsUser(err) && r.cluster.WhoAmI != nil {
		if sj.Spec.Origin.User, err = r.cluster.WhoAmI(ctx); err != nil {
			return nil, err
		}
		err = shelljob.CreateQuotaCounted(ctx, create)
	}
	if q, ok := shelljob.QuotaFull(err); ok {
		return nil, fmt.Errorf("create shelljob in namespace %s: %w", sj.Namespace, q)
	}
	if err != nil {
		return nil, fmt.Errorf("create shelljob: %w", err)
	}
	r.user = created.Spec.Origin.User
	return created, nil
}

// needsUser tells whether the origin policy refused a job for naming no
// user: the cluster has no origin-user policy to fill it in.
func needsUser(err error) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "spec.origin.user")
}

// run runs req to its end and returns the command's exit code.
func (r *runner) run(ctx context.Context, req jobRequest) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sj, err := r.newJob(req)
	if err != nil {
		return 1, err
	}
	created, err := r.createJob(ctx, sj)
	if err != nil {
		return 1, err
	}
	return r.attach(ctx, created, r.newOutput())
}

// output is where a job's output goes: the terminal, through the renderer
// with --render.
type output struct {
	w    io.Writer
	rend *termrender.Renderer
}

func (r *runner) newOutput() *output {
	if r.render {
		rend := &termrender.Renderer{}
		return &output{w: rend, rend: rend}
	}
	return &output{w: r.Out}
}

// outputFollow is a follow of a job's output.
type outputFollow struct {
	cancel context.CancelFunc
	done   chan struct{}
	// err is why the follow failed, whole whether it read the output to
	// its close, and exit the job's exit that came with the close, if the
	// stream API and the worker's agent told it; all are read after done.
	err   error
	whole bool
	exit  *agentapi.Event
}

// startFollow follows the output of job from its start, through the
// stream API, which holds the follow until the job starts, wherever it is
// placed, and resumes a cut stream from where it was.
func (r *runner) startFollow(ctx context.Context, o *output, job string) *outputFollow {
	f := &outputFollow{done: make(chan struct{})}
	fctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	go func() {
		defer close(f.done)
		w := &agentapi.ExitWriter{Writer: o.w}
		_, err := r.cluster.Stream.Follow(fctx, job, agentapi.AwaitStart, w)
		switch {
		case err == nil:
			f.whole, f.exit = true, w.Exited
		case fctx.Err() == nil || ctx.Err() != nil:
			// A follow stopped here is no failure.
			f.err = err
		}
	}()
	return f
}

// stop ends the follow and waits for its end.
func (f *outputFollow) stop() {
	f.cancel()
	<-f.done
}

// attach streams a created job to its end. Its follow opens at once: it
// overlaps the job's placement and start.
func (r *runner) attach(ctx context.Context, sj *shellv1alpha1.ShellJob, o *output) (int, error) {
	f := r.startFollow(ctx, o, sj.Name)
	defer f.stop()
	jobs := make(chan *shellv1alpha1.ShellJob, 1)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- r.cluster.watchJob(ctx, sj, func(j *shellv1alpha1.ShellJob) bool {
			// Keep only the latest: the loop below wants the state, not
			// each step.
			select {
			case <-jobs:
			default:
			}
			jobs <- j
			return shelljob.IsFinished(j)
		})
	}()

	var (
		last    = sj
		stopped bool
		// waiting is what the terminal was last told the job waits for.
		waiting    string
		steps      int
		followDone = f.done
	)
	for {
		select {
		case <-ctx.Done():
			return 1, ctx.Err()
		case <-followDone:
			followDone = nil
			if code, ok := exitedAlone(f, last, stopped); ok {
				// Nothing to tell but the exit code: the job's status,
				// a write and a watch event later, would add nothing.
				files := !f.exit.LeftNoFiles()
				// The stream API marked a job with no files delivered.
				marked := r.cluster.Stream.Delivers() && !files
				return r.deliver(ctx, sj.Name, o, f, true, files, marked, func() (int, error) { return code, nil })
			}
		case err := <-watchErr:
			if err != nil {
				return 1, err
			}
			watchErr = nil // finished: the last state is in jobs
		case <-r.interrupts:
			if stopped {
				fmt.Fprintf(r.ErrOut, "Detached from #%d; it goes on without you.\n"+
					"  follow it: kubectl shelljob logs -f %s\n  stop it:   kubectl shelljob stop %s\n",
					last.Status.Number, sj.Name, sj.Name)
				return ExitInterrupted, nil
			}
			stopped = true
			outcome, err := r.cluster.stopJob(ctx, sj.Name)
			if err != nil {
				return 1, err
			}
			fmt.Fprintln(r.ErrOut, outcome.Text(last.Status.Number)+" (Ctrl-C again to detach)")
		case j := <-jobs:
			last = j
			if w := waitingFor(j); w != "" && w != waiting {
				waiting = w
				fmt.Fprintln(r.ErrOut, w)
			}
			for ; steps < len(j.Status.StopSteps); steps++ {
				s := j.Status.StopSteps[steps]
				note := ""
				if s.GroupEmpty {
					note = "; the process group is empty"
				}
				fmt.Fprintf(r.ErrOut, "⏹ #%d: %s sent%s\n", j.Status.Number, s.Signal, note)
			}
			if !shelljob.IsFinished(j) {
				continue
			}
			return r.finish(ctx, j, o, f)
		}
	}
}

// waitingFor is what the terminal says of a job that waits: for approval,
// for its author's other jobs, for a free worker; "" for one that does
// not.
func waitingFor(j *shellv1alpha1.ShellJob) string {
	n := j.Status.Number
	switch {
	case n == 0 || shelljob.IsFinished(j) || shelljob.IsAssigned(j):
		return ""
	case shelljob.IsAwaitingApproval(j):
		return texts.HeaderAwaitingApproval(n)
	case !shelljob.IsWaiting(j) || shelljob.Phase(j) != shellv1alpha1.PhaseQueued:
		return ""
	}
	if own, ok := texts.RunningOfUser(j); ok {
		return texts.HeaderWaitingOwn(n, own)
	}
	return texts.HeaderQueued(n)
}

// exitedAlone tells whether the follow f read the whole output of a job
// whose command ended by itself, as the exit that came with the output
// says, and returns its exit code: no stop was asked (last is the job as
// the watch last showed it) or sent, and the worker neither lost the job
// nor shut it down nor saw an out-of-memory kill. Anything else is told
// from the job's status.
func exitedAlone(f *outputFollow, last *shellv1alpha1.ShellJob, stopped bool) (int, bool) {
	e := f.exit
	if !f.whole || e == nil || !e.EndedAlone() || stopped || shelljob.IsStopRequested(last) {
		return 0, false
	}
	return *e.ExitCode, true
}

// finish waits for the output of the ended job j, saves its files and
// returns its exit code.
func (r *runner) finish(ctx context.Context, j *shellv1alpha1.ShellJob, o *output, f *outputFollow) (int, error) {
	started := shelljob.IsStarted(j)
	if !started {
		// Nothing ran: nothing to wait for.
		f.stop()
	} else {
		t := time.NewTimer(outputWait)
		select {
		case <-f.done:
		case <-t.C:
			f.stop()
			f.err = fmt.Errorf("the rest of the output did not come within %v of the job's end", outputWait)
		}
		t.Stop()
	}
	return r.deliver(ctx, j.Name, o, f, started, shelljob.MayHaveFiles(j), false, func() (int, error) { return r.exitCode(j) })
}

// deliver ends the follow f of the ended job name: it saves the job's
// files when it may have left some, marks it delivered unless the stream
// API marked it, and tells how it ended with exitCode.
func (r *runner) deliver(ctx context.Context, name string, o *output, f *outputFollow, started, mayHaveFiles, marked bool, exitCode func() (int, error)) (int, error) {
	var (
		files    []string
		skipped  outfiles.Report
		filesErr error
	)
	// The output is closed: the job has ended, so its files are complete.
	if started && f.whole && mayHaveFiles {
		files, skipped, filesErr = r.saveFiles(ctx, name)
	}
	// Delivered: nothing ran, or its output was read to its end and its
	// files fetched. A job left undelivered keeps its worker, retired,
	// for the operator's delivery grace.
	var markErr error
	if !marked && (!started || (f.whole && filesErr == nil)) {
		markErr = r.cluster.markDelivered(ctx, name, r.clock.Now())
	}
	if o.rend != nil {
		if _, err := io.WriteString(r.Out, o.rend.String()); err != nil {
			return 1, err
		}
	}
	for _, file := range files {
		fmt.Fprintln(r.ErrOut, "saved", file)
	}
	if started && f.err != nil {
		fmt.Fprintln(r.ErrOut, "warning: output:", f.err)
	}
	r.warnSkipped(skipped)
	if filesErr != nil {
		fmt.Fprintln(r.ErrOut, "warning: files:", filesErr)
	}
	if markErr != nil {
		fmt.Fprintln(r.ErrOut, "warning:", markErr)
	}
	return exitCode()
}

// warnSkipped warns of the files saveFiles left out.
func (r *runner) warnSkipped(rep outfiles.Report) {
	limits := r.fileLimits.WithDefaults()
	for _, s := range rep.Skipped {
		fmt.Fprintln(r.ErrOut, "warning: files: not saved:", texts.OutFileSkipped(s.Name, s, limits))
	}
	if rep.Unlisted > 0 {
		fmt.Fprintf(r.ErrOut, "warning: files: %d more not saved, for their size\n", rep.Unlisted)
	}
	if rep.OverCount > 0 {
		fmt.Fprintf(r.ErrOut, "warning: files: %d more not saved: a command saves at most %d\n", rep.OverCount, limits.Count)
	}
}

// exitCode tells how the job ended and returns its exit code.
func (r *runner) exitCode(j *shellv1alpha1.ShellJob) (int, error) {
	n := j.Status.Number
	e := shelljob.EndOf(j)
	switch {
	case e.TimedOut:
		fmt.Fprintf(r.ErrOut, "⏹ #%d stopped: no output for %ds (--timeout).\n", n, idleTimeout(j))
		return ExitTimeout, nil
	case e.NotApproved:
		fmt.Fprintln(r.ErrOut, texts.EndNote(e))
		return ExitNotApproved, nil
	case e.Reason == shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun:
		fmt.Fprintln(r.ErrOut, texts.StoppedBeforeRun)
		return ExitInterrupted, nil
	case e.ExitCode < 0:
		return 1, fmt.Errorf("#%d ended without an exit status: %s: %s", n, e.Reason, e.Message)
	case e.Stopped && e.StopBy != r.user:
		// Someone else stopped it: say who.
		fmt.Fprintln(r.ErrOut, texts.StoppedByNote(e.StopBy, e.ExitCode))
	case e.Stopped:
		fmt.Fprintln(r.ErrOut, texts.StoppedNote(e.ExitCode))
	}
	return e.ExitCode, nil
}

func idleTimeout(j *shellv1alpha1.ShellJob) int64 {
	if j.Spec.IdleTimeoutSeconds == nil {
		return 0
	}
	return *j.Spec.IdleTimeoutSeconds
}

// saveFiles streams the files the command left in $SHELLJOB_OUT from the
// job's tar stream into the output directory, each straight into its
// file, within the file limits, and shows PNG images inline on a
// terminal. It returns the paths written and what was left out. No name
// reaches outside the directory (os.Root), and a file cut short is
// removed.
func (r *runner) saveFiles(ctx context.Context, job string) ([]string, outfiles.Report, error) {
	dir := r.outputDir
	if dir == "" {
		dir = filepath.Join("shelljob-out", job)
	}
	pr, pw := io.Pipe()
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		pw.CloseWithError(r.cluster.Stream.GetFiles(ctx, job, pw))
	}()
	defer func() {
		// Closing the reader ends a GetFiles still writing.
		pr.Close()
		<-fetched
	}()
	var (
		root  *os.Root
		saved []string
	)
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	report, err := outfiles.Read(pr, outfiles.Options{Limits: r.fileLimits}, func(f outfiles.File, content io.Reader) error {
		if root == nil {
			// Made at the first file: a job that leaves none makes no
			// directory.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var err error
			if root, err = os.OpenRoot(dir); err != nil {
				return err
			}
		}
		if err := saveFile(root, f.Name, content); err != nil {
			return err
		}
		saved = append(saved, filepath.Join(dir, filepath.FromSlash(f.Name)))
		if strings.EqualFold(path.Ext(f.Name), ".png") && isTerminal(r.Out) {
			return showImage(r.Out, root, f.Name)
		}
		return nil
	})
	return saved, report, err
}

// saveFile writes content to name in root, and removes what it wrote if
// the copy fails.
func saveFile(root *os.Root, name string, content io.Reader) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("save %s: %w", name, err)
		}
	}
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("save %s: %w", name, err)
	}
	_, err = io.Copy(out, content)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(name)
		return fmt.Errorf("save %s: %w", name, err)
	}
	return nil
}

// showImage shows the saved PNG name of root inline (writeKitty).
func showImage(w io.Writer, root *os.Root, name string) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = writeKitty(w, f)
	return err
}
