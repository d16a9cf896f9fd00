package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/shelljob"
)

// runFiles runs a job whose agent has files, saving them under dir within
// limits, and returns its stderr and the job as it ended.
func runFiles(t *testing.T, agent *fakeStream, dir string, limits outfiles.Limits) (string, *shellv1alpha1.ShellJob) {
	t.Helper()
	cluster := fakeCluster(t, agent)
	var out, errOut bytes.Buffer
	now := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	r := &runner{cluster: cluster, IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut},
		outputDir: dir, clock: clocktesting.NewFakePassiveClock(now), fileLimits: limits}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := r.run(ctx, jobRequest{Command: "files", Mode: shellv1alpha1.ModeFork, Pool: "p"})
	if err != nil || code != 0 || out.String() != agent.Output {
		t.Fatalf("exit %d, %v, stdout %q, stderr %q", code, err, out.String(), errOut.String())
	}
	js := jobs(t, cluster)
	if len(js) != 1 {
		t.Fatalf("%d jobs", len(js))
	}
	return errOut.String(), &js[0]
}

// savedFiles lists the regular files under dir, slash-separated.
func savedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return names
}

// Files go to disk within the limits of one file, of the job's bytes and
// of its count, as the bot's; a warning names each left out.
func TestFilesSavedWithinLimits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	zeros := func(n int) []byte { return make([]byte, n) }
	agent := &fakeStream{Output: "done\n", Files: map[string][]byte{
		"a.txt": zeros(100), "big.bin": zeros(2048), "c.txt": zeros(1000), "d/d.txt": zeros(1000),
		"e.txt": zeros(1000), "f.txt": []byte("f"), "g.txt": zeros(1), "h.txt": zeros(1),
	}}
	errOut, job := runFiles(t, agent, dir, outfiles.Limits{File: 1 << 10, Job: 3 << 10, Count: 4})
	if got, want := savedFiles(t, dir), []string{"a.txt", "c.txt", "d/d.txt", "f.txt"}; !slices.Equal(got, want) {
		t.Errorf("saved %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f.txt")); err != nil || string(b) != "f" {
		t.Errorf("f.txt: %q, %v", b, err)
	}
	for _, want := range []string{
		"saved " + filepath.Join(dir, "d", "d.txt") + "\n",
		"warning: files: not saved: big.bin (2.0 KB, over the 1.0 KB limit for one file)\n",
		"warning: files: not saved: e.txt (1000 bytes, past the 3.0 KB limit for a command's files)\n",
		"warning: files: 2 more not saved: a command saves at most 4\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	if at, ok := shelljob.Delivered(job); !ok || !at.Equal(time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)) {
		t.Errorf("delivered mark %v, %v; annotations %v", at, ok, job.Annotations)
	}
}

// The default limits are the bot's: 100 files.
func TestFilesDefaultCount(t *testing.T) {
	files := map[string][]byte{}
	for i := range 130 {
		files[filepath.Join("many", strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("0", i/26))] = []byte("x")
	}
	dir := t.TempDir()
	errOut, _ := runFiles(t, &fakeStream{Output: "ok\n", Files: files}, dir, outfiles.Limits{})
	if n := len(savedFiles(t, dir)); n != 100 {
		t.Errorf("%d files saved, want 100", n)
	}
	if !strings.Contains(errOut, "warning: files: 30 more not saved: a command saves at most 100\n") {
		t.Errorf("stderr %q", errOut)
	}
}

// No file reaches outside the output directory: not by a name with "..",
// nor through a link planted in the directory.
func TestFilesStayInTheOutputDir(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	agent := &fakeStream{Output: "ok\n", Files: map[string][]byte{
		"../up.txt": []byte("x"), "a.txt": []byte("a"), "link/planted.txt": []byte("x"),
	}}
	errOut, job := runFiles(t, agent, dir, outfiles.Limits{})
	if got := savedFiles(t, outside); len(got) != 0 {
		t.Errorf("written outside the output directory: %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "up.txt")); err == nil {
		t.Error("../up.txt written beside the output directory")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "a" {
		t.Errorf("a.txt: %q, %v", b, err)
	}
	if !strings.Contains(errOut, `warning: files: not saved: "../up.txt" (not a path inside $SHELLJOB_OUT)`) ||
		!strings.Contains(errOut, "warning: files: save link/planted.txt") {
		t.Errorf("stderr %q", errOut)
	}
	// A file the disk refused is not delivered: the worker keeps it.
	if _, ok := shelljob.Delivered(job); ok {
		t.Errorf("marked delivered: %v", job.Annotations)
	}
}

// A job is marked delivered once its output was read to its end and its
// files fetched, and not when either failed; a failed mark is a warning.
func TestDeliveredMark(t *testing.T) {
	for name, tc := range map[string]struct {
		agent     *fakeStream
		patchErr  error
		delivered bool
		warning   string
	}{
		"no files":        {agent: &fakeStream{Output: "hi\n"}, delivered: true},
		"files":           {agent: &fakeStream{Output: "hi\n", Files: map[string][]byte{"a.txt": []byte("a")}}, delivered: true},
		"output cut":      {agent: &fakeStream{Output: "hi\n", FollowErr: errors.New("stream cut")}, warning: "warning: output: stream cut"},
		"files cut":       {agent: &fakeStream{Output: "hi\n", Files: map[string][]byte{"a.txt": []byte("a")}, GetFilesErr: errors.New("exec cut")}, warning: "warning: files: read the files' tar stream: exec cut"},
		"the mark failed": {agent: &fakeStream{Output: "hi\n"}, patchErr: errors.New("forbidden"), warning: "warning: mark shelljob cli-"},
	} {
		t.Run(name, func(t *testing.T) {
			cluster := fakeCluster(t, tc.agent)
			cluster.Jobs.(*fakeJobs).patchErr = tc.patchErr
			out, errOut, code := testCmd(t, cluster, strings.NewReader(""), "exec", "--output-dir", t.TempDir(), "--", "echo", "hi")
			if code != 0 || out != "hi\n" {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			if tc.warning != "" && !strings.Contains(errOut, tc.warning) {
				t.Errorf("stderr %q lacks %q", errOut, tc.warning)
			}
			js := jobs(t, cluster)
			at, ok := shelljob.Delivered(&js[0])
			if ok != tc.delivered || (ok && time.Since(at) > time.Minute) {
				t.Errorf("delivered %v at %v, want %v", ok, at, tc.delivered)
			}
		})
	}
}
