package agent

// Jobs on one worker are kept apart by user. Each Fork (and Direct) job
// runs as a user and group of its own, from ForkUIDBase up; the persistent
// shell of Stateful jobs runs as StatefulUID. Supplementary groups are
// cleared. Where the worker allows it, each also runs in namespaces of its
// own (sandbox.go), so that it sees no other job's processes. The agent
// stays root, with only the capabilities it needs (see
// RequiredCapabilities), and keeps to itself what commands must not reach:
//
//	SPOOL/                0711 agent: traversed, not listed
//	SPOOL/agent.sock      0600 agent: no command can connect
//	SPOOL/zdotdir/        0755 agent: read by every shell
//	SPOOL/jobs/           0711 agent: job ids are not listed
//	SPOOL/jobs/ID/        0711 agent
//	SPOOL/jobs/ID/output/ 0700 agent: the spool, written by the agent
//	SPOOL/jobs/ID/files/  0700, the job's user while it runs, the agent after
//	SPOOL/jobs/ID/home/   0700 job's user: a Fork job's HOME and cwd, removed when it ends
//	HOME                  0700 StatefulUID: the persistent shell's home
//
// A job's files go back to the agent (owner and 0700, from the top down,
// so that no process of the job can move anything once it was looked at)
// before its end is reported, so before anyone collects them. The agent
// sets its umask to 077, so what a command leaves in a shared place such
// as /tmp is its own user's alone.
//
// Fork users are handed out in turn and never reused while a process of
// theirs lives. When a Fork job ends, every process of its user is killed
// and its files in the worker's shared places (/tmp and the like) are
// removed (cleanup.go), so a user that comes back finds nothing of its
// earlier job. Successive Stateful jobs share StatefulUID, as they share
// the shell: one may see what the shell kept of an earlier one, and
// processes the earlier one left running; no other job can.
//
// An agent without the capabilities (a developer's, or an old pod that
// runs as the image's user) runs commands as itself, unless asked to
// require isolation.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Users of isolated commands.
const (
	// StatefulUID runs the persistent shell, with group StatefulUID: the
	// worker image's user "shell" (hack/images.sh), whose home is the
	// shell's.
	StatefulUID = 1000
	// ForkUIDBase is the first user (and group) of Fork jobs: above the
	// users an image's passwd names (system users, and 1000 up for
	// people), and with ForkUIDCount below 65534 (nobody): a pod in a user
	// namespace (hostUsers: false) has users 0-65535 alone.
	ForkUIDBase = 10000
	// ForkUIDCount is how many Fork users there are: more than a worker
	// runs jobs at once by far, so that a user comes back only long after
	// its earlier job ended.
	ForkUIDCount = 50000
)

// UIDRange is a range of Fork users: First to First+Count-1.
type UIDRange struct{ First, Count int }

// DefaultForkUIDs are the Fork users of an agent that names none.
var DefaultForkUIDs = UIDRange{ForkUIDBase, ForkUIDCount}

func (r UIDRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1) }

func (r UIDRange) has(uid int) bool { return uid >= r.First && uid < r.First+r.Count }

// ParseUIDRange parses FIRST-LAST, within DefaultForkUIDs.
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	r := UIDRange{first, last - first + 1}
	if !ok || err1 != nil || err2 != nil || r.Count < 1 || !DefaultForkUIDs.has(first) || !DefaultForkUIDs.has(last) {
		return UIDRange{}, fmt.Errorf("%q: want FIRST-LAST within %s", s, DefaultForkUIDs)
	}
	return r, nil
}

// Isolation says whether commands run as users of their own.
type Isolation string

const (
	// IsolationAuto isolates jobs when the agent has
	// RequiredCapabilities, and otherwise logs why not and runs commands
	// as itself. The default.
	IsolationAuto Isolation = "auto"
	// IsolationRequired refuses to serve without isolation: what the
	// operator's worker pods ask for.
	IsolationRequired Isolation = "required"
	// IsolationOff runs commands as the agent itself.
	IsolationOff Isolation = "off"
)

// RequiredCapabilities are what an isolating agent keeps, and why:
//   - CHOWN: hand a job's files and home to its user, and take them back;
//   - KILL: signal the process groups of jobs, which are other users';
//   - SETGID: start a command with its own group and no supplementary ones;
//   - SETUID: start a command as its own user.
//
// Nothing else: no DAC_OVERRIDE or FOWNER (the agent takes a directory
// back by owning it first, then reading it), and a command, started as
// another user, keeps none of them.
var RequiredCapabilities = []string{"CHOWN", "KILL", "SETGID", "SETUID"}

var capabilityBits = map[string]uint{"CHOWN": unix.CAP_CHOWN, "KILL": unix.CAP_KILL, "SETGID": unix.CAP_SETGID, "SETUID": unix.CAP_SETUID}

// missingCapabilities lists the RequiredCapabilities the process lacks in
// its effective set.
func missingCapabilities() ([]string, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, fmt.Errorf("read capabilities: %w", err)
	}
	var missing []string
	for _, name := range RequiredCapabilities {
		bit := capabilityBits[name]
		if data[bit/32].Effective&(1<<(bit%32)) == 0 {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// cred is a user and group.
type cred struct{ uid, gid int }

func (c cred) sys() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid), Groups: []uint32{}}
}

// users hands out the users of isolated commands.
type users struct {
	// agent owns what the agent keeps: its own user and group.
	agent cred
	// forks are the Fork users.
	forks UIDRange
	mu    sync.Mutex
	// next is the offset in the Fork range of the next user to try.
	next int
	// live lists the users processes run as; nil means liveUIDs.
	live func() map[int]bool
}

// decideIsolation returns the users of an isolating agent, or nil when
// commands run as the agent; why is the reason for the latter, to log.
func decideIsolation(mode Isolation, forks UIDRange) (u *users, why string, err error) {
	switch mode {
	case IsolationOff:
		return nil, "off", nil
	case IsolationAuto, IsolationRequired:
	default:
		return nil, "", fmt.Errorf("unknown isolation %q", mode)
	}
	if why = IsolationImpossible(); why == "" {
		return &users{agent: cred{os.Geteuid(), os.Getegid()}, forks: forks}, "", nil
	}
	if mode == IsolationRequired {
		return nil, "", fmt.Errorf("isolation required, but impossible: %s", why)
	}
	return nil, why, nil
}

// IsolationImpossible says why this process could not isolate jobs, or
// returns "" when it could.
func IsolationImpossible() string {
	missing, err := missingCapabilities()
	if err != nil {
		return err.Error()
	}
	if len(missing) > 0 {
		return "missing capabilities " + strings.Join(missing, ", ")
	}
	if uid := os.Geteuid(); uid == StatefulUID || DefaultForkUIDs.has(uid) {
		return "the agent runs as user " + strconv.Itoa(uid) + ", one of the commands' users"
	}
	return ""
}

// stateful is the user of the persistent shell.
func (u *users) stateful() cred { return cred{StatefulUID, StatefulUID} }

// fork returns the next Fork user that no live process runs as.
func (u *users) fork() (cred, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	live := u.live
	if live == nil {
		live = liveUIDs
	}
	busy := live()
	for range u.forks.Count {
		uid := u.forks.First + u.next
		u.next = (u.next + 1) % u.forks.Count
		if !busy[uid] {
			return cred{uid, uid}, nil
		}
	}
	return cred{}, errors.New("every job user has a live process")
}

// used notes that an earlier run gave uid out, so that it comes next only
// after the rest.
func (u *users) used(uid int) {
	if !u.forks.has(uid) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if off := uid - u.forks.First + 1; off > u.next {
		u.next = off % u.forks.Count
	}
}

// liveUIDs are the users that processes run as: the owners of /proc/PID.
func liveUIDs() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				out[int(st.Uid)] = true
			}
		}
	}
	return out
}

// hand gives path, and all under it, to c: the agent made all of it, so
// it holds no link a command planted. A directory goes last, as the agent
// may not read it once it is c's.
func hand(path string, c cred) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := hand(filepath.Join(path, e.Name()), c); err != nil {
				return err
			}
		}
	}
	return os.Lchown(path, c.uid, c.gid)
}

// reclaim gives path, and all under it, back to owner, whatever a command
// did there: each directory is owned and closed (0700) before it is read,
// so no process of the command's user can add, remove or swap an entry
// once the agent looked at it. Regular files become readable to owner.
func reclaim(path string, owner cred) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Lchown(path, owner.uid, owner.gid); err != nil {
		return err
	}
	switch {
	case fi.Mode().IsRegular():
		return os.Chmod(path, fi.Mode().Perm()|0o600)
	case !fi.IsDir():
		return nil
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return err
	}
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	var errs []error
	err = eachEntry(d, func(e fs.DirEntry) error {
		if err := reclaim(filepath.Join(path, e.Name()), owner); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// ownDir makes path a directory of c alone (0700). The agent owns it for
// the chmod, as it may not change the mode of another's file.
func ownDir(path string, agent, c cred) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is no directory", path)
	}
	if err := os.Lchown(path, agent.uid, agent.gid); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return err
	}
	return os.Lchown(path, c.uid, c.gid)
}
