package outfiles

import (
	"archive/tar"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Default limits: the files go through the bot's upload to a chat, or to
// the disk of kubectl shelljob's user; neither is a place for gigabytes,
// nor for a hundred thousand documents.
const (
	DefaultFileBytes = 50 << 20
	DefaultJobBytes  = 200 << 20
	DefaultCount     = 100
)

// MaxListed is how many of the files left out for their size or name a
// Report names; it counts the others. Ten names of up to 255 bytes, each
// with its reason, fit in one chat message.
const MaxListed = 10

// Limits caps the files of one job. Each zero field takes its default.
type Limits struct {
	// File is the most bytes of one file. Defaults to DefaultFileBytes.
	File int64
	// Job is the most bytes of one job's files, all together. Defaults to
	// DefaultJobBytes.
	Job int64
	// Count is the most files of one job. Defaults to DefaultCount.
	Count int
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	l.File = cmp.Or(l.File, DefaultFileBytes)
	l.Job = cmp.Or(l.Job, DefaultJobBytes)
	l.Count = cmp.Or(l.Count, DefaultCount)
	return l
}

// Decision is what becomes of one file.
type Decision int

const (
	// Take: the file is within every limit.
	Take Decision = iota
	// TooBig: the file alone is over Limits.File (or its size is
	// negative, which no tar stream gives).
	TooBig
	// JobFull: the files taken before it and this one are over Limits.Job.
	JobFull
	// OverCount: Limits.Count files were taken before it.
	OverCount
	// BadName: its name is no path inside the directory (absolute, or with
	// ".." in it). The agent never writes one; a stream that holds one is
	// not the agent's.
	BadName
)

func (d Decision) String() string {
	switch d {
	case Take:
		return "take"
	case TooBig:
		return "too big"
	case JobFull:
		return "past the job's bytes"
	case OverCount:
		return "past the job's count"
	case BadName:
		return "bad name"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Tally decides, file by file in order, which files of one job are taken:
// the first files within the limits, until Limits.Count of them are. A
// file left out for its size does not count toward Limits.Count, and a
// smaller one after it may still be taken. The zero Tally has the default
// limits.
type Tally struct {
	Limits Limits
	files  int
	bytes  int64
}

// Decide tells what becomes of the next file, of size bytes, and counts it
// if it is taken.
func (t *Tally) Decide(size int64) Decision {
	l := t.Limits.WithDefaults()
	switch {
	case t.files >= l.Count:
		return OverCount
	case size < 0 || size > l.File:
		return TooBig
	case size > l.Job-t.bytes:
		return JobFull
	}
	t.files++
	t.bytes += size
	return Take
}

// Taken returns the files taken so far and their bytes.
func (t *Tally) Taken() (files int, bytes int64) { return t.files, t.bytes }

// File is a regular file of the stream.
type File struct {
	// Name is its path in the directory: slash-separated, clean and
	// local (fs.ValidPath), such as "a.txt" or "plots/b.png".
	Name string
	// Size is its length in bytes, as its header gives it.
	Size int64
	// Mode is its permission bits.
	Mode fs.FileMode
}

// Skip is a file left out, and why.
type Skip struct {
	// Name is the file's path in the directory, or the name its header
	// gave when that is no such path (BadName).
	Name string
	Size int64
	Why  Decision
}

// Report is what Read left out.
type Report struct {
	// Taken and TakenBytes count the files handed to the caller.
	Taken      int
	TakenBytes int64
	// Skipped names the first MaxListed files left out for their size or
	// their name, in the stream's order.
	Skipped []Skip
	// Unlisted counts the files left out for their size or their name
	// past the first MaxListed.
	Unlisted int
	// OverCount counts the files left out because Limits.Count files were
	// taken before them.
	OverCount int
}

// LeftOut tells whether any file was left out.
func (r Report) LeftOut() bool {
	return len(r.Skipped) > 0 || r.Unlisted > 0 || r.OverCount > 0
}

func (r *Report) skip(s Skip) {
	switch {
	case s.Why == OverCount:
		r.OverCount++
	case len(r.Skipped) < MaxListed:
		r.Skipped = append(r.Skipped, s)
	default:
		r.Unlisted++
	}
}

// Options configure a Read.
type Options struct {
	// Limits cap the files taken.
	Limits Limits
	// Ignore, when set, passes over each file whose name it reports, as if
	// it were not in the stream: it counts toward no limit and is not
	// reported. The bot passes over the replied-to files it put there.
	Ignore func(name string) bool
}

// Read walks the tar stream r and calls take with each regular file the
// limits let through, in the stream's order, and its content: a reader of
// at most f.Size bytes, valid until take returns, which take need not read
// to its end. Directories, links and other entries are passed over. An
// error of take ends the walk and is returned; a broken stream ends it
// with the stream's error, even one after the archive's end. The Report
// says what was left out of the files read so far, and is valid with
// either error.
func Read(r io.Reader, o Options, take func(f File, content io.Reader) error) (rep Report, err error) {
	tally := Tally{Limits: o.Limits}
	defer func() { rep.Taken, rep.TakenBytes = tally.Taken() }()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// What follows the archive's end is read too, so that a
			// stream that fails after it (an exec that ends in an error)
			// fails the Read.
			if _, err := io.Copy(io.Discard, r); err != nil {
				return rep, fmt.Errorf("read the files' tar stream: %w", err)
			}
			return rep, nil
		}
		if err != nil {
			return rep, fmt.Errorf("read the files' tar stream: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name, ok := localName(h.Name)
		if !ok {
			rep.skip(Skip{Name: h.Name, Size: h.Size, Why: BadName})
			continue
		}
		if o.Ignore != nil && o.Ignore(name) {
			continue
		}
		if d := tally.Decide(h.Size); d != Take {
			rep.skip(Skip{Name: name, Size: h.Size, Why: d})
			continue
		}
		if err := take(File{Name: name, Size: h.Size, Mode: h.FileInfo().Mode().Perm()}, tr); err != nil {
			return rep, err
		}
	}
}

// localName is name without a leading "./", if it is then a clean local
// path: no "..", "." or empty element, and not absolute.
func localName(name string) (string, bool) {
	name = strings.TrimPrefix(name, "./")
	return name, name != "." && fs.ValidPath(name)
}
