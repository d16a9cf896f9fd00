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

	"shelljob.dev/shelljob/internal/agentapi"
)

// PutFiles unpacks a tar stream of regular files and directories into the
// job's $SHELLJOB_OUT, before the job starts.
func (d *Daemon) PutFiles(id string, r io.Reader) error {
	if err := checkID(id); err != nil {
		return err
	}
	d.mu.Lock()
	_, started := d.jobs[id]
	_, starting := d.starting[id]
	d.mu.Unlock()
	if started || starting {
		return fmt.Errorf("put files of %s: %w", id, agentapi.ErrStarted)
	}
	root := filepath.Join(d.jobsDir, id, filesDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("put files of %s: %w", id, err)
	}
	if err := untar(r, root); err != nil {
		return fmt.Errorf("put files of %s: %w", id, err)
	}
	return nil
}

func untar(r io.Reader, root string) error {
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
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := writeFile(dst, tr, h.FileInfo().Mode().Perm()|0o600); err != nil {
				return err
			}
		default:
			return fmt.Errorf("refusing %q: only files and directories", h.Name)
		}
	}
}

func writeFile(dst string, r io.Reader, mode os.FileMode) error {
	// O_NOFOLLOW: a command may not have planted a link here, but a file
	// is never written through one.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// GetFiles writes the job's $SHELLJOB_OUT as a tar stream: directories,
// regular files and symbolic links (as links; never followed).
func (d *Daemon) GetFiles(id string, w io.Writer) error {
	if err := checkID(id); err != nil {
		return err
	}
	root := filepath.Join(d.jobsDir, id, filesDir)
	if _, err := os.Stat(root); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("get files of %s: %w", id, agentapi.ErrUnknownJob)
		}
		return fmt.Errorf("get files of %s: %w", id, err)
	}
	if err := tarDir(root, w); err != nil {
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

func tarDir(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
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
		if !fi.Mode().IsRegular() {
			return tw.WriteHeader(h)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		// A file that grows while it is read is cut at its size in the header.
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
