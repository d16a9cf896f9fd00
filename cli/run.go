package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/texts"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/termrender"
)

// Exit codes beyond the command's own.
const (
	// ExitTimeout is the exit code after the idle timeout, as timeout(1)
	// uses.
	ExitTimeout = 124
	// ExitInterrupted is the exit code of a detach or a job stopped before
	// it ran: 128+SIGINT.
	ExitInterrupted = 130
)

// followRetry is the wait before following a job's output again after the
// stream broke.
const followRetry = time.Second

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

	// user is the job origin's user, once known: the API server fills it
	// in (the origin-user policy), or a SelfSubjectReview tells it.
	user string
}

// create makes the ShellJob of req. Its origin's user is left for the API
// server to fill in (config/policy, origin-user.yaml), so that no request
// goes before the create. A cluster without that policy refuses the job
// (the origin policy): the CLI then asks who it is and names the user
// itself. Either way the cluster checks it: the CLI's own idea is not
// trusted.
func (r *runner) create(ctx context.Context, req jobRequest) (*shellv1alpha1.ShellJob, error) {
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
	created, err := r.cluster.Jobs.Create(ctx, sj, metav1.CreateOptions{})
	if err != nil && r.user == "" && needsUser(err) && r.cluster.WhoAmI != nil {
		if sj.Spec.Origin.User, err = r.cluster.WhoAmI(ctx); err != nil {
			return nil, err
		}
		created, err = r.cluster.Jobs.Create(ctx, sj, metav1.CreateOptions{})
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
	sj, err := r.create(ctx, req)
	if err != nil {
		return 1, err
	}
	return r.attach(ctx, sj)
}

// attach streams a created job to its end.
func (r *runner) attach(ctx context.Context, sj *shellv1alpha1.ShellJob) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
		last      = sj
		following bool
		followPod string
		// cancelFollow ends the follow of followPod.
		cancelFollow context.CancelFunc
		stopped      bool
		queued       bool
		steps        int
		wg           sync.WaitGroup
		files        []string
		filesErr     error
		followErr    error
		followed     bool // the follow read the output to its close
		ended        atomic.Bool
	)
	var out io.Writer = r.Out
	var rend *termrender.Renderer
	if r.render {
		rend = &termrender.Renderer{}
		out = rend
	}
	for {
		select {
		case <-ctx.Done():
			return 1, ctx.Err()
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
			fmt.Fprintln(r.ErrOut, outcome.text(last.Status.Number)+" (Ctrl-C again to detach)")
		case j := <-jobs:
			last = j
			if !queued && !following && shelljob.Phase(j) == shellv1alpha1.PhaseQueued && j.Status.Number != 0 &&
				shelljob.IsWaiting(j) {
				queued = true
				fmt.Fprintln(r.ErrOut, texts.HeaderQueued(j.Status.Number))
			}
			for ; steps < len(j.Status.StopSteps); steps++ {
				s := j.Status.StopSteps[steps]
				note := ""
				if s.GroupEmpty {
					note = "; the process group is empty"
				}
				fmt.Fprintf(r.ErrOut, "⏹ #%d: %s sent%s\n", j.Status.Number, s.Signal, note)
			}
			// The follow opens as soon as the job is placed, and the agent
			// holds it until the command starts: its setup overlaps the
			// start. A job placed again before it started (its worker was
			// lost) is followed on its new worker.
			if j.Status.Pod != "" && j.Status.Pod != followPod {
				if following {
					cancelFollow()
					wg.Wait()
				}
				following, followPod = true, j.Status.Pod
				pod := r.cluster.workerPod(j)
				fctx, fcancel := context.WithCancel(ctx)
				cancelFollow = fcancel
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := r.follow(fctx, pod, string(j.UID), out, ended.Load); err != nil {
						if fctx.Err() == nil || ctx.Err() != nil {
							followErr = err
						}
						return
					}
					followed = true
				}()
			}
			if !shelljob.IsFinished(j) {
				continue
			}
			ended.Store(true)
			if following {
				if !shelljob.IsStarted(j) {
					// Nothing ran: nothing to wait for.
					cancelFollow()
				}
				wg.Wait()
			}
			// The output is closed: the job has ended, so its files are
			// complete, and its status says whether it left any (an older
			// agent does not say).
			if followed && shelljob.MayHaveFiles(j) {
				files, filesErr = r.saveFiles(ctx, j)
			}
			if rend != nil {
				if _, err := io.WriteString(r.Out, rend.String()); err != nil {
					return 1, err
				}
			}
			for _, f := range files {
				fmt.Fprintln(r.ErrOut, "saved", f)
			}
			if followErr != nil {
				fmt.Fprintln(r.ErrOut, "warning: output:", followErr)
			}
			if filesErr != nil {
				fmt.Fprintln(r.ErrOut, "warning: files:", filesErr)
			}
			return r.exitCode(j)
		}
	}
}

// follow copies the job's output to w until it is closed, following again
// from the offset reached after a cut stream, unless ended says the job has
// ended (its worker may be gone). It may begin before the job starts: the
// agent holds the follow until then.
func (r *runner) follow(ctx context.Context, pod types.NamespacedName, job string, w io.Writer, ended func() bool) error {
	offset := agentapi.AwaitStart
	for {
		reached, err := r.cluster.Agent.Follow(ctx, pod, job, offset, w)
		if reached > 0 {
			offset = max(offset, reached)
		}
		if offset == agentapi.AwaitStart && errors.Is(err, agentapi.ErrUsage) {
			// An agent older than AwaitStart: follow from 0 once the job
			// runs, retrying until then.
			offset = 0
		}
		if err == nil || ctx.Err() != nil || (ended != nil && ended()) {
			return err
		}
		select {
		case <-time.After(followRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// exitCode tells how the job ended and returns its exit code.
func (r *runner) exitCode(j *shellv1alpha1.ShellJob) (int, error) {
	n := j.Status.Number
	reason, msg := finishedReason(j)
	timeout := j.Status.StopReason == shellv1alpha1.StopReasonTimeout
	switch {
	case timeout:
		fmt.Fprintf(r.ErrOut, "⏹ #%d stopped: no output for %ds (--timeout).\n", n, idleTimeout(j))
		return ExitTimeout, nil
	case reason == shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun:
		fmt.Fprintln(r.ErrOut, texts.StoppedBeforeRun)
		return ExitInterrupted, nil
	case j.Status.ExitCode == nil:
		return 1, fmt.Errorf("#%d ended without an exit status: %s: %s", n, reason, msg)
	case shelljob.IsStopped(j):
		fmt.Fprintln(r.ErrOut, texts.StoppedNote(int(*j.Status.ExitCode)))
	}
	return int(*j.Status.ExitCode), nil
}

func idleTimeout(j *shellv1alpha1.ShellJob) int64 {
	if j.Spec.IdleTimeoutSeconds == nil {
		return 0
	}
	return *j.Spec.IdleTimeoutSeconds
}

// saveFiles writes the files the command left in $SHELLJOB_OUT under the
// output directory, shows images inline on a terminal, and returns the
// paths written.
func (r *runner) saveFiles(ctx context.Context, j *shellv1alpha1.ShellJob) ([]string, error) {
	var buf bytes.Buffer
	if err := r.cluster.Agent.GetFiles(ctx, r.cluster.workerPod(j), string(j.UID), &buf); err != nil {
		return nil, err
	}
	dir := r.outputDir
	if dir == "" {
		dir = filepath.Join("shelljob-out", j.Name)
	}
	var saved []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return saved, nil
		}
		if err != nil {
			return saved, err
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return saved, err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return saved, err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return saved, err
		}
		saved = append(saved, path)
		if strings.EqualFold(filepath.Ext(path), ".png") {
			if _, err := writeKitty(r.Out, data); err != nil {
				return saved, err
			}
		}
	}
}
