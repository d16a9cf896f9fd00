package cli

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// LastWorkers remembers, in kubectl's cache directory, the worker pod that
// ran the last job of each pool and mode. The next command opens its
// follow there before its job is even created, and its job prefers that
// worker (AnnotationPreferredWorker): the exec's setup, the longest step of
// a short command, then overlaps the create and the placement. A job that
// goes elsewhere (its worker was busy, or is gone) costs only an exec,
// closed as soon as the placement shows, and a follow opened where the job
// went. The nil LastWorkers remembers nothing.
type LastWorkers struct {
	dir string
	// known is what recall read or remember wrote, by file.
	known map[string]types.NamespacedName
}

// NewLastWorkers keeps what it remembers of the cluster at server under
// cacheDir.
func NewLastWorkers(cacheDir, server string) *LastWorkers {
	if cacheDir == "" {
		return nil
	}
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		server = u.Host + u.Path
	}
	return &LastWorkers{
		dir:   filepath.Join(cacheDir, "shelljob", "workers", safeName(server)),
		known: map[string]types.NamespacedName{},
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// file is where the worker of jobs like sj is kept.
func (l *LastWorkers) file(sj *shellv1alpha1.ShellJob) string {
	return filepath.Join(l.dir, safeName(sj.Namespace),
		safeName(shelljob.Pool(sj))+"."+strings.ToLower(safeName(string(shelljob.Mode(sj)))))
}

// recall returns the worker that ran the last job of sj's pool and mode,
// if known.
func (l *LastWorkers) recall(sj *shellv1alpha1.ShellJob) (types.NamespacedName, bool) {
	if l == nil {
		return types.NamespacedName{}, false
	}
	f := l.file(sj)
	if pod, ok := l.known[f]; ok {
		return pod, pod.Name != ""
	}
	data, err := os.ReadFile(f)
	var pod types.NamespacedName
	if ns, name, ok := strings.Cut(strings.TrimSpace(string(data)), "/"); err == nil && ok && ns != "" && name != "" {
		pod = types.NamespacedName{Namespace: ns, Name: name}
	}
	l.known[f] = pod
	return pod, pod.Name != ""
}

// remember keeps pod as the worker of the last job of sj's pool and mode.
// A cache that cannot be written is no error: the next command only
// follows later.
func (l *LastWorkers) remember(sj *shellv1alpha1.ShellJob, pod types.NamespacedName) {
	if l == nil {
		return
	}
	f := l.file(sj)
	if l.known[f] == pod {
		return
	}
	l.known[f] = pod
	if err := os.MkdirAll(filepath.Dir(f), 0o750); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(f), ".worker-*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(pod.String() + "\n")
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), f) != nil {
		_ = os.Remove(tmp.Name())
	}
}
