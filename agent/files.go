package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

// PutFiles unpacks a tar stream of regular files and directories into the
// job's $SHELLJOB_OUT, before the job starts. A start of the job waits
// for the put to end, and a put after the start is refused: the command
// sees all of a put's files or none. Nothing is written outside the
// directory, whatever the names or links in it.
func (d *Daemon) PutFiles(id string, r io.Reader) error {
	if err := checkID(id); err != nil {
		return err
	}
	done, err := d.beginPut(id)
	if err != nil {
		return err
	}
	defer done()
	root := filepath.Join(d.jobsDir, id, filesDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("put files of %s: %w", id, err)
	}
	if err := untar(r, root); err != nil {
		return fmt.Errorf("put files of %s: %w", id, err)
	}
	return nil
}

// beginPut registers a put of job id, unless the job has started or is
// starting; done ends it, and lets a start that waits for it go.
func (d *Daemon) beginPut(id string) (done func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		_, started := d.jobs[id]
		_, starting := d.starting[id]
		if started || starting {
			return nil, fmt.Errorf("put files of %s: %w", id, agentapi.ErrStarted)
		}
		ch := d.putting[id]
		if ch == nil {
			break
		}
		// Another put of the same job: one after the other.
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
	ch := make(chan struct{})
	d.putting[id] = ch
	return func() {
		d.mu.Lock()
		delete(d.putting, id)
		d.mu.Unlock()
		close(ch)
	}, nil
}

func untar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if !fs.ValidPath(name) {
			return fmt.Errorf("refusing %q: outside the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if parent := path.Dir(name); parent != "." {
				if err := root.MkdirAll(parent, 0o755); err != nil {
					return err
				}
			}
			if err := writeFile(root, name, tr, h.FileInfo().Mode().Perm()|0o600); err != nil {
				return err
			}
		default:
			return fmt.Errorf("refusing %q: only files and directories", h.Name)
		}
	}
}

func writeFile(root *os.Root, name string, r io.Reader, mode os.FileMode) error {
	// O_NOFOLLOW: a file is never written through a link, even one that
	// stays inside.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// GetFiles writes the job's $SHELLJOB_OUT as a tar stream, from byte
// offset of it on: directories, regular files and symbolic links (as
// links; never followed). The stream of a job that has ended is the same
// at every read (tarDir), so that a reader cut half way reads the rest
// from the offset it reached. An offset past the stream's end writes
// nothing.
func (d *Daemon) GetFiles(id string, offset int64, w io.Writer) error {
	if err := checkID(id); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("get files of %s: offset %d: an offset counts bytes from 0", id, offset)
	}
	root := filepath.Join(d.jobsDir, id, filesDir)
	if _, err := os.Stat(root); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("get files of %s: %w", id, agentapi.ErrUnknownJob)
		}
		return fmt.Errorf("get files of %s: %w", id, err)
	}
	if err := tarDir(root, offset, w); err != nil {
		return fmt.Errorf("get files of %s: %w", id, err)
	}
	return nil
}

// checkFiles tells whether GetFiles would find the job's directory, so that
// a caller can answer before the stream starts.
func (d *Daemon) checkFiles(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(d.jobsDir, id, filesDir)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("get files of %s: %w", id, agentapi.ErrUnknownJob)
	}
	return nil
}

// countFiles counts the regular files of the job's $SHELLJOB_OUT, as
// tarDir would find them, or returns nil when it cannot: its readers then
// fetch the files to know.
func (d *Daemon) countFiles(j *job) *agentapi.Files {
	var n agentapi.Files
	err := walkOut(filepath.Join(j.dir, filesDir), func(_, _ string, fi fs.FileInfo) error {
		if fi.Mode().IsRegular() {
			n.Count++
			n.Bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		d.log.Error(err, "Could not count a job's files", "job", j.id)
		return nil
	}
	return &n
}

// dirBatch is how many entries of one directory a walk reads at once: a
// command may leave a hundred thousand files in $SHELLJOB_OUT, and no walk
// holds all their names.
const dirBatch = 1024

// walkOut calls fn with each path below root, its path relative to root,
// and its info, depth first, a directory before what it holds. A directory
// of up to dirBatch entries comes in lexical order; a bigger one a batch
// at a time, each batch in lexical order. What is removed while it walks
// is skipped.
func walkOut(root string, fn func(p, rel string, fi fs.FileInfo) error) error {
	return walkDir(root, "", fn)
}

// walkDir is walkOut of the directory rel below root. The directory stays
// open while its subdirectories are walked: one descriptor a level.
func walkDir(root, rel string, fn func(p, rel string, fi fs.FileInfo) error) error {
	d, err := os.Open(filepath.Join(root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed while we walked
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return eachEntry(d, func(e fs.DirEntry) error {
		erel := filepath.Join(rel, e.Name())
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(filepath.Join(root, erel), erel, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			return walkDir(root, erel, fn)
		}
		return nil
	})
}

// eachEntry calls fn with the entries of the open directory d, read
// dirBatch at a time, each batch in lexical order, until fn fails.
func eachEntry(d *os.File, fn func(fs.DirEntry) error) error {
	for {
		ents, err := d.ReadDir(dirBatch)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range ents {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// tarDir writes the tar stream of root from byte offset on. The stream
// depends on nothing a read changes: the entries come in walkOut's order,
// and each header holds the entry's name, mode, size, owner and
// modification time, never its access or change time, nor an owner's
// name. So, once nothing writes in root (the job has ended, and its user's
// processes with it), every read gives the same bytes, a directory of more
// than dirBatch entries included, since a directory that does not change
// lists its entries in the same order. The bytes before offset are made
// and dropped, with the content of a file that lies wholly before it never
// read.
func tarDir(root string, offset int64, w io.Writer) error {
	skip := &agentapi.Skipper{W: w, Skip: offset}
	tw := tar.NewWriter(skip)
	err := walkOut(root, func(p, rel string, fi fs.FileInfo) error {
		var link string
		switch {
		case fi.Mode().IsDir(), fi.Mode().IsRegular():
		case fi.Mode()&fs.ModeSymlink != 0:
			var err error
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return nil // FIFOs, sockets, devices
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if !fi.Mode().IsRegular() {
			return tw.WriteHeader(h)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if skip.Skip >= h.Size {
			// Wholly before the offset: dropped unread.
			_, err := io.CopyN(tw, zeros{}, h.Size)
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		// A file that grows while it is read is cut at its size in the
		// header; one that shrinks fails the stream.
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// zeros reads zero bytes without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
