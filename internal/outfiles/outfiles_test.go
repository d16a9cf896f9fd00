package outfiles_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"shelljob.dev/shelljob/internal/outfiles"
)

func TestTallyDecide(t *testing.T) {
	small := outfiles.Limits{File: 10, Job: 25, Count: 3}
	for name, tc := range map[string]struct {
		limits outfiles.Limits
		sizes  []int64
		want   []outfiles.Decision
	}{
		"within every limit": {small, []int64{10, 10, 5}, []outfiles.Decision{outfiles.Take, outfiles.Take, outfiles.Take}},
		"one file too big":   {small, []int64{11, 10}, []outfiles.Decision{outfiles.TooBig, outfiles.Take}},
		"the job's bytes": {small, []int64{10, 10, 10, 5},
			[]outfiles.Decision{outfiles.Take, outfiles.Take, outfiles.JobFull, outfiles.Take}},
		"the count": {small, []int64{0, 0, 0, 0, 1},
			[]outfiles.Decision{outfiles.Take, outfiles.Take, outfiles.Take, outfiles.OverCount, outfiles.OverCount}},
		"skips do not count": {small, []int64{11, 30, 1, 1, 1, 1},
			[]outfiles.Decision{outfiles.TooBig, outfiles.TooBig, outfiles.Take, outfiles.Take, outfiles.Take, outfiles.OverCount}},
		"past the count, even a file too big": {outfiles.Limits{File: 10, Job: 25, Count: 1}, []int64{1, 11},
			[]outfiles.Decision{outfiles.Take, outfiles.OverCount}},
		"a negative size":  {small, []int64{-1, 1}, []outfiles.Decision{outfiles.TooBig, outfiles.Take}},
		"exactly the job":  {outfiles.Limits{File: 25, Job: 25}, []int64{25, 0, 1}, []outfiles.Decision{outfiles.Take, outfiles.Take, outfiles.JobFull}},
		"default count":    {outfiles.Limits{}, make([]int64, 101), append(repeat(outfiles.Take, 100), outfiles.OverCount)},
		"default per file": {outfiles.Limits{}, []int64{50 << 20, 50<<20 + 1}, []outfiles.Decision{outfiles.Take, outfiles.TooBig}},
		"default per job": {outfiles.Limits{}, []int64{50 << 20, 50 << 20, 50 << 20, 50 << 20, 1},
			[]outfiles.Decision{outfiles.Take, outfiles.Take, outfiles.Take, outfiles.Take, outfiles.JobFull}},
	} {
		t.Run(name, func(t *testing.T) {
			tally := outfiles.Tally{Limits: tc.limits}
			var got []outfiles.Decision
			for _, s := range tc.sizes {
				got = append(got, tally.Decide(s))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

func repeat(d outfiles.Decision, n int) []outfiles.Decision {
	out := make([]outfiles.Decision, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// entry is one tar entry of a test stream.
type entry struct {
	name string
	typ  byte
	data string
}

func reg(name, data string) entry { return entry{name: name, typ: tar.TypeReg, data: data} }

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o640, Size: int64(len(e.data))}
		switch e.typ {
		case tar.TypeSymlink:
			h.Linkname, h.Size = "a.txt", 0
		case tar.TypeDir, tar.TypeFifo:
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// taken is a file handed to take, with the content take read.
type taken struct {
	Name string
	Size int64
	Data string
}

func TestRead(t *testing.T) {
	small := outfiles.Limits{File: 10, Job: 25, Count: 3}
	long := strings.Repeat("d/", 80) + "long.txt"
	for name, tc := range map[string]struct {
		entries []entry
		opts    outfiles.Options
		want    []taken
		report  outfiles.Report
	}{
		"files in order": {
			entries: []entry{reg("a.txt", "aaa"), {name: "sub/", typ: tar.TypeDir}, reg("sub/b.txt", "bb"), reg("./c.txt", "")},
			opts:    outfiles.Options{Limits: small},
			want:    []taken{{"a.txt", 3, "aaa"}, {"sub/b.txt", 2, "bb"}, {"c.txt", 0, ""}},
			report:  outfiles.Report{Taken: 3, TakenBytes: 5},
		},
		"links, directories and FIFOs are passed over": {
			entries: []entry{{name: "dir/", typ: tar.TypeDir}, {name: "link", typ: tar.TypeSymlink}, {name: "fifo", typ: tar.TypeFifo}, reg("a.txt", "a")},
			want:    []taken{{"a.txt", 1, "a"}},
			report:  outfiles.Report{Taken: 1, TakenBytes: 1},
		},
		"each limit": {
			entries: []entry{reg("big.bin", strings.Repeat("x", 11)), reg("a", "0123456789"), reg("b", "0123456789"), reg("c", "0123456789"),
				reg("d", "01234"), reg("e", "0"), reg("f", "0")},
			opts: outfiles.Options{Limits: small},
			want: []taken{{"a", 10, "0123456789"}, {"b", 10, "0123456789"}, {"d", 5, "01234"}},
			report: outfiles.Report{Taken: 3, TakenBytes: 25, OverCount: 2, Skipped: []outfiles.Skip{
				{Name: "big.bin", Size: 11, Why: outfiles.TooBig}, {Name: "c", Size: 10, Why: outfiles.JobFull}}},
		},
		"names that leave the directory": {
			entries: []entry{reg("/etc/passwd", "x"), reg("../up", "x"), reg("a/../../up", "x"), reg("a/../b", "x"), reg("a//b", "x"), reg("ok", "x")},
			want:    []taken{{"ok", 1, "x"}},
			report: outfiles.Report{Taken: 1, TakenBytes: 1, Skipped: []outfiles.Skip{
				{Name: "/etc/passwd", Size: 1, Why: outfiles.BadName}, {Name: "../up", Size: 1, Why: outfiles.BadName},
				{Name: "a/../../up", Size: 1, Why: outfiles.BadName}, {Name: "a/../b", Size: 1, Why: outfiles.BadName},
				{Name: "a//b", Size: 1, Why: outfiles.BadName}}},
		},
		"a long name": {
			entries: []entry{reg(long, "x")},
			want:    []taken{{long, 1, "x"}},
			report:  outfiles.Report{Taken: 1, TakenBytes: 1},
		},
		"ignored files count toward nothing": {
			entries: []entry{reg("notes.txt", "0123456789"), reg("a", "1"), reg("sub/notes.txt", "0123456789"), reg("b", "2"), reg("c", "3")},
			opts: outfiles.Options{Limits: outfiles.Limits{Count: 3, Job: 3}, Ignore: func(name string) bool {
				return strings.HasSuffix(name, "notes.txt")
			}},
			want:   []taken{{"a", 1, "1"}, {"b", 1, "2"}, {"c", 1, "3"}},
			report: outfiles.Report{Taken: 3, TakenBytes: 3},
		},
		"at most MaxListed named": {
			entries: func() []entry {
				var es []entry
				for i := range outfiles.MaxListed + 5 {
					es = append(es, reg(fmt.Sprintf("big%02d", i), "too big"))
				}
				return es
			}(),
			opts: outfiles.Options{Limits: outfiles.Limits{File: 1}},
			report: func() outfiles.Report {
				r := outfiles.Report{Unlisted: 5}
				for i := range outfiles.MaxListed {
					r.Skipped = append(r.Skipped, outfiles.Skip{Name: fmt.Sprintf("big%02d", i), Size: 7, Why: outfiles.TooBig})
				}
				return r
			}(),
		},
	} {
		t.Run(name, func(t *testing.T) {
			var got []taken
			rep, err := outfiles.Read(bytes.NewReader(tarOf(t, tc.entries...)), tc.opts, func(f outfiles.File, r io.Reader) error {
				data, err := io.ReadAll(r)
				got = append(got, taken{f.Name, f.Size, string(data)})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.report, rep); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if rep.LeftOut() != (len(tc.report.Skipped)+tc.report.Unlisted+tc.report.OverCount > 0) {
				t.Errorf("LeftOut() = %v", rep.LeftOut())
			}
		})
	}
}

// A file read in part, or not at all, leaves the stream at the next one.
func TestReadPartly(t *testing.T) {
	stream := tarOf(t, reg("a", "first file"), reg("b", "second file"), reg("c", "third"))
	var got []string
	_, err := outfiles.Read(bytes.NewReader(stream), outfiles.Options{}, func(f outfiles.File, r io.Reader) error {
		switch f.Name {
		case "a":
			buf := make([]byte, 3)
			_, err := io.ReadFull(r, buf)
			got = append(got, string(buf))
			return err
		case "b":
			return nil
		}
		data, err := io.ReadAll(r)
		got = append(got, string(data))
		return err
	})
	if err != nil || !slicesEqual(got, []string{"fir", "third"}) {
		t.Errorf("got %q, %v", got, err)
	}
}

func slicesEqual(a, b []string) bool { return cmp.Equal(a, b) }

// take's error ends the walk; a broken stream ends it with an error, and
// the report says what was read before.
func TestReadErrors(t *testing.T) {
	stream := tarOf(t, reg("a", "1"), reg("big", "0123456789"), reg("b", "2"), reg("c", "3"))
	stop := errors.New("stop")
	var names []string
	rep, err := outfiles.Read(bytes.NewReader(stream), outfiles.Options{Limits: outfiles.Limits{File: 5}}, func(f outfiles.File, _ io.Reader) error {
		names = append(names, f.Name)
		if f.Name == "b" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slicesEqual(names, []string{"a", "b"}) || rep.Taken != 2 || len(rep.Skipped) != 1 {
		t.Errorf("take's error: %v, names %q, report %+v", err, names, rep)
	}

	// Cut in the middle of b's content.
	cut := stream[:bytes.Index(stream, []byte("2"))+1]
	rep, err = outfiles.Read(bytes.NewReader(cut), outfiles.Options{Limits: outfiles.Limits{File: 5}}, func(f outfiles.File, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err == nil || rep.Taken < 1 {
		t.Errorf("a cut stream: %v, report %+v", err, rep)
	}

	// A header that claims far more than the stream holds: left out for its
	// size, then the stream ends short of it.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40})
	_, _ = tw.Write([]byte("only this"))
	rep, err = outfiles.Read(bytes.NewReader(buf.Bytes()), outfiles.Options{}, func(outfiles.File, io.Reader) error {
		t.Error("a file of a TiB was taken")
		return nil
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(rep.Skipped) != 1 || rep.Skipped[0].Why != outfiles.TooBig {
		t.Errorf("a huge header: %v, report %+v", err, rep)
	}

	// The stream fails after the archive's end, as an exec that ends in an
	// error does.
	failed := errors.New("exec ended with an error")
	_, err = outfiles.Read(io.MultiReader(bytes.NewReader(stream), iotest.ErrReader(failed)), outfiles.Options{}, func(outfiles.File, io.Reader) error { return nil })
	if !errors.Is(err, failed) {
		t.Errorf("a stream failed after its end: %v", err)
	}

	if _, err := outfiles.Read(strings.NewReader("not a tar stream, not at all, and longer than a block? no"), outfiles.Options{}, nil); err == nil {
		t.Error("garbage: no error")
	}
}

// The report of a stream of very many files stays small: what is past the
// count, or left out by name after MaxListed, is only counted. The files
// come through a pipe, as from the agent, and nothing keeps their names.
func TestReadManyFiles(t *testing.T) {
	const n = 100_000
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := range n {
			data := ""
			if i%2 == 1 {
				data = "x"
			}
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}); err != nil {
				pw.CloseWithError(err)
				return
			}
			_, _ = io.WriteString(tw, data)
		}
		pw.CloseWithError(tw.Close())
	}()
	// The job's bytes are full after 1 byte: every odd file is left out
	// for its size, every even one taken until the count.
	rep, err := outfiles.Read(pr, outfiles.Options{Limits: outfiles.Limits{Job: 1, Count: 1000}}, func(outfiles.File, io.Reader) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Taken != 1000 || len(rep.Skipped) != outfiles.MaxListed || rep.Taken+len(rep.Skipped)+rep.Unlisted+rep.OverCount != n {
		t.Errorf("taken %d, %d named, %d unlisted, %d over the count", rep.Taken, len(rep.Skipped), rep.Unlisted, rep.OverCount)
	}
}

// FuzzRead: whatever the stream, Read does not panic, takes only clean
// local names within the limits, hands at most Size bytes of each, and
// names at most MaxListed files.
func FuzzRead(f *testing.F) {
	f.Add(tarOf(f, reg("a.txt", "hello"), entry{name: "d/", typ: tar.TypeDir}, reg("d/b", "0123456789abcdef")))
	f.Add(tarOf(f, reg("../x", "up"), reg("/abs", "x"), reg("a/./b", "x"), reg("a\\b", "x"), reg("./ok", "x")))
	f.Add(tarOf(f, entry{name: "link", typ: tar.TypeSymlink}, entry{name: "fifo", typ: tar.TypeFifo}, entry{name: "hard", typ: tar.TypeLink}, reg("x", "1")))
	f.Add(tarOf(f, reg(strings.Repeat("n", 300), "pax name"), reg("é/ü.txt", "utf-8")))
	var huge bytes.Buffer
	tw := tar.NewWriter(&huge)
	_ = tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Size: 1 << 40, PAXRecords: map[string]string{"comment": strings.Repeat("c", 4096)}})
	f.Add(huge.Bytes())
	f.Add([]byte{})
	f.Add(make([]byte, 1024))
	limits := outfiles.Limits{File: 8, Job: 20, Count: 3}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, _ := outfiles.Read(bytes.NewReader(data), outfiles.Options{Limits: limits}, func(file outfiles.File, r io.Reader) error {
			if !fs.ValidPath(file.Name) || file.Name == "." {
				t.Errorf("took %q", file.Name)
			}
			if file.Size > limits.File || file.Size < 0 {
				t.Errorf("took %q of %d bytes", file.Name, file.Size)
			}
			n, _ := io.Copy(io.Discard, r)
			if n > file.Size {
				t.Errorf("%q gave %d bytes, its size is %d", file.Name, n, file.Size)
			}
			return nil
		})
		if rep.Taken > limits.Count || rep.TakenBytes > limits.Job || len(rep.Skipped) > outfiles.MaxListed {
			t.Errorf("report %+v", rep)
		}
	})
}
