package agent

// When a Fork job ends, nothing of its user stays on the worker: no
// process (its namespaces' end took them where it has namespaces of its
// own; else the agent kills them, KillUser), and no file in the places
// every user may write, the worker's shared places: /tmp, /var/tmp,
// /dev/shm and every other world-writable directory of the worker's image,
// found when the agent starts (discoverShared).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

const (
	// userGone bounds the wait for the processes of a job's user to end
	// once they were sent SIGKILL (and for the agent to reap them).
	userGone = 5 * time.Second
	// maxSweepDepth bounds how deep a sweep looks for a user's files.
	maxSweepDepth = 64
	// maxDiscover bounds the walk that looks for shared places.
	maxDiscover = 500_000
)

// defaultShared are the shared places of an agent that is not a pod's
// PID 1 (a developer's, a test's), which walks nothing.
var defaultShared = []string{"/tmp", "/var/tmp", "/dev/shm"}

// sharedPlaces are the directories whose entries a job's user may leave
// behind: dirs when set, else those of the worker's image (as PID 1),
// else defaultShared; only those that exist, and never the spool.
func sharedPlaces(dirs []string, spool string) []string {
	if dirs == nil {
		if os.Getpid() == 1 {
			dirs = discoverShared("/", spool)
		} else {
			dirs = defaultShared
		}
	}
	return slices.DeleteFunc(slices.Clone(dirs), func(d string) bool {
		fi, err := os.Stat(d)
		return err != nil || !fi.IsDir() || d == spool
	})
}

// discoverShared walks root for the world-writable directories, below
// none of which it looks: /proc, /sys and the spool are left out.
func discoverShared(root, spool string) []string {
	var out []string
	seen := 0
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if seen++; seen > maxDiscover {
			return filepath.SkipAll
		}
		if err != nil || !e.IsDir() {
			return nil
		}
		switch p {
		case "/proc", "/sys", spool:
			return filepath.SkipDir
		}
		fi, err := e.Info()
		if err == nil && fi.Mode().Perm()&0o002 != 0 {
			out = append(out, p)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// killUser makes sure no process of uid is left, and waits until none
// is, its zombies reaped.
func (d *Daemon) killUser(uid int) error {
	if !liveUIDs()[uid] {
		return nil
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	attr := &syscall.ProcAttr{
		Dir: "/", Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()},
		Sys: &syscall.SysProcAttr{Credential: cred{uid, uid}.sys()},
	}
	_, exited, err := d.reaper.Start(selfExe, []string{"shelljob-agent", KillUserCommand}, attr)
	if err != nil {
		return fmt.Errorf("kill the processes of user %d: %w", uid, err)
	}
	if st := <-exited; st.Code() != 0 {
		return fmt.Errorf("kill the processes of user %d: %s", uid, st)
	}
	for deadline := time.Now().Add(userGone); liveUIDs()[uid]; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of user %d still live %v after SIGKILL", uid, userGone)
		}
	}
	return nil
}

// KillUserCommand is the agent's subcommand that runs KillUser.
const KillUserCommand = "kill-user"

// sweepUser removes what uid owns in the shared places, however deep, as
// the agent (owner): it takes each of uid's directories before it reads
// it, as reclaim does. It walks through os.Root, so that no link a job
// left, nor a directory another job swaps, takes it out of the place.
// The agent's own directories (keep), where they lie in a shared place, as
// a test's do, are left alone.
func sweepUser(places []string, uid int, owner cred, keep ...string) error {
	var errs []error
	for _, place := range places {
		root, err := os.OpenRoot(place)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := sweep{root: root, uid: uid, owner: owner, keep: keep}
		errs = append(errs, s.dir(".", 0))
		root.Close()
	}
	return errors.Join(errs...)
}

// sweep is one shared place's sweep for a user.
type sweep struct {
	root  *os.Root
	uid   int
	owner cred
	keep  []string
}

func (s sweep) dir(dir string, depth int) error {
	root, uid, owner := s.root, s.uid, s.owner
	if depth > maxSweepDepth {
		return nil
	}
	names, err := readNames(root, dir)
	if err != nil {
		// Another user's directory closed to the agent: uid could not
		// have written there either, unless it was -wx to all.
		return nil
	}
	var errs []error
	for _, name := range names {
		p := path.Join(dir, name)
		if slices.Contains(s.keep, filepath.Join(root.Name(), p)) {
			continue
		}
		fi, err := root.Lstat(p)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
		case int(st.Uid) == uid:
			if err := removeOwned(root, p, fi, owner); err != nil {
				errs = append(errs, fmt.Errorf("remove %s of user %d: %w", filepath.Join(root.Name(), p), uid, err))
			}
		case fi.IsDir():
			errs = append(errs, s.dir(p, depth+1))
		}
	}
	return errors.Join(errs...)
}

// removeOwned removes p, and all below it: a directory is the agent's
// (owner's, 0700) before it is read, so that nothing in it is closed to
// the agent; anything else is the agent's before it goes, as a sticky
// place that is not the agent's (a user-namespaced pod's /dev/shm, whose
// owner is no user of the pod) lets only a file's owner remove it.
func removeOwned(root *os.Root, p string, fi fs.FileInfo, owner cred) error {
	if !fi.IsDir() {
		if err := root.Lchown(p, owner.uid, owner.gid); err != nil {
			return err
		}
	}
	if fi.IsDir() {
		if err := root.Lchown(p, owner.uid, owner.gid); err != nil {
			return err
		}
		if err := root.Chmod(p, 0o700); err != nil {
			return err
		}
		names, err := readNames(root, p)
		if err != nil {
			return err
		}
		for _, name := range names {
			q := path.Join(p, name)
			if cfi, err := root.Lstat(q); err == nil {
				if err := removeOwned(root, q, cfi, owner); err != nil {
					return err
				}
			}
		}
	}
	if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readNames lists the entries of directory dir of root.
func readNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
