package bot_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/texts"
)

// hungStreamIdle is the bot's idle limit of a stream in these tests.
const hungStreamIdle = 2 * time.Second

// hangingFiles stops the agent (SIGSTOP) of the job's worker, as a worker
// that stops answering, as the bot asks for the job's files or puts its
// input files, and reports how each transfer ended. (internal/agentclient's
// tests stop agents mid-stream in both ways.)
type hangingFiles struct {
	bot.Cluster
	cluster atomic.Pointer[clustertest.Cluster]
	ended   chan error

	mu      sync.Mutex
	resumes []func()
}

func newHangingFiles() *hangingFiles { return &hangingFiles{ended: make(chan error, 4)} }

// pause stops the agent of job's worker.
func (h *hangingFiles) pause(ctx context.Context, job string) error {
	c := h.cluster.Load()
	sj, err := c.Job(ctx, job)
	if err != nil {
		return err
	}
	resume := c.Agents.Pause(types.NamespacedName{Namespace: cmp.Or(sj.Status.PodNamespace, sj.Namespace), Name: sj.Status.Pod})
	h.mu.Lock()
	h.resumes = append(h.resumes, resume)
	h.mu.Unlock()
	return nil
}

func (h *hangingFiles) resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.resumes {
		r()
	}
}

func (h *hangingFiles) GetFiles(ctx context.Context, job string, w io.Writer) error {
	if err := h.pause(ctx, job); err != nil {
		return err
	}
	err := h.Cluster.GetFiles(ctx, job, w)
	h.ended <- err
	return err
}

func (h *hangingFiles) PutFiles(ctx context.Context, job string, r io.Reader) error {
	if err := h.pause(ctx, job); err != nil {
		return err
	}
	err := h.Cluster.PutFiles(ctx, job, r)
	h.ended <- err
	return err
}

// transferEnded waits for a transfer to a hung agent to end: it must, cut
// idle, within a bound generous for a loaded machine.
func (h *hangingFiles) transferEnded(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-h.ended:
		if !errors.Is(err, agentapi.ErrStreamIdle) {
			t.Errorf("%s from a hung worker: %v, want ErrStreamIdle", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s from a hung worker still waits after a minute", what)
	}
}

// hungEnv is an env whose workers stop answering at the bot's first file
// transfer; they answer again when the test ends.
func hungEnv(t *testing.T) (*env, *hangingFiles) {
	h := newHangingFiles()
	e := newEnv(t, envOptions{streamIdle: hungStreamIdle, wrap: func(c bot.Cluster) bot.Cluster { h.Cluster = c; return h }})
	h.cluster.Store(e.cluster)
	t.Cleanup(h.resume)
	return e, h
}

// A job whose worker stops answering when the bot gets its files is
// delivered all the same: the transfer is cut idle, and no file goes out.
func TestFilesOfAHungWorker(t *testing.T) {
	e, h := hungEnv(t)
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, `.a echo made > "$SHELLJOB_OUT/out.txt"; echo made`)
	if ev := e.final(since, e.group, m.ID); ev.Text != "made" {
		t.Errorf("final = %q", ev.Text)
	}
	h.transferEnded(t, "get-files")
	e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
	for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
		if ev.Media != nil && ev.Media.Filename == "out.txt" {
			t.Errorf("a file of a hung worker went out: %+v", ev.Media)
		}
	}
}

// A held job whose worker stops answering while the bot puts its input
// files is stopped before it runs once the transfer is cut idle: the
// command never runs without its files, and its final says why.
func TestInputFilesToAHungWorker(t *testing.T) {
	e, h := hungEnv(t)
	since := e.srv.Seq()
	doc, err := e.admin.In(e.group).Document("notes.txt", "text/plain", []byte("from the chat\n")).Text(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.admin.In(e.group).Reply(doc.ID).Text(e.ctx, `.a cat "$SHELLJOB_OUT/notes.txt" 2>/dev/null || echo no notes`)
	if err != nil {
		t.Fatal(err)
	}
	h.transferEnded(t, "put-files")
	h.resume()
	if ev := e.final(since, e.group, m.ID); ev.Text != texts.StoppedBeforeRun+"\n\n"+texts.InFilesNotPut {
		t.Errorf("final = %q", ev.Text)
	}
	sj, err := e.cluster.Job(e.ctx, jobOf(m))
	if err != nil {
		t.Fatal(err)
	}
	if _, put := sj.Annotations[shellv1alpha1.AnnotationFilesPut]; put {
		t.Error("files recorded as put")
	}
}
