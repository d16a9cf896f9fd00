package agent

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// walkOut visits every path once, a directory before what it holds, a
// small directory in lexical order, and a directory of more entries than
// it reads at once all the same.
func TestWalkOut(t *testing.T) {
	root := t.TempDir()
	var want []string
	mk := func(rel string, dir bool) {
		p := filepath.Join(root, rel)
		var err error
		if dir {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rel)
	}
	mk("b", true)
	mk("b/z", false)
	mk("b/a", false)
	mk("a", false)
	mk("many", true)
	n := 2*dirBatch + 10
	for i := range n {
		mk(filepath.Join("many", fmt.Sprintf("%05d", n-i)), false)
	}
	mk("many/sub", true)
	mk("many/sub/x", false)

	var got []string
	index := map[string]int{}
	err := walkOut(root, func(p, rel string, fi fs.FileInfo) error {
		if p != filepath.Join(root, rel) {
			t.Errorf("path %q for %q", p, rel)
		}
		index[rel] = len(got)
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(index) != len(want) {
		t.Fatalf("%d paths visited, %d of them different; want %d", len(got), len(index), len(want))
	}
	for _, rel := range want {
		if _, ok := index[rel]; !ok {
			t.Errorf("%s not visited", rel)
		}
		if d := filepath.Dir(rel); d != "." && index[d] > index[rel] {
			t.Errorf("%s before its directory", rel)
		}
	}
	if small := got[:4]; !slices.Equal(small, []string{"a", "b", "b/a", "b/z"}) {
		t.Errorf("first paths %q, want the small directories in lexical order", small)
	}
	if index["many/sub/x"] != index["many/sub"]+1 {
		t.Error("many/sub/x does not follow its directory")
	}
}

// A walk of a directory of very many files holds a batch of their names,
// not all of them: the live heap stays small however many there are. Both
// walks of a job's files go through it: sending or counting them
// (walkOut), and taking them back at the job's end (reclaim).
func TestWalksOfManyFiles(t *testing.T) {
	root := t.TempDir()
	const n = 50_000
	long := strings.Repeat("x", 200)
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("%06d-%s", i, long)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, walk := range map[string]func() error{
		"walkOut": func() error {
			seen := 0
			err := walkOut(root, func(string, string, fs.FileInfo) error { seen++; return nil })
			if err == nil && seen != n {
				err = fmt.Errorf("%d of %d files seen", seen, n)
			}
			return err
		},
		"reclaim": func() error { return reclaim(root, cred{uid: os.Getuid(), gid: os.Getgid()}) },
	} {
		t.Run(name, func(t *testing.T) {
			grew, err := liveHeapGrowth(walk)
			if err != nil {
				t.Fatal(err)
			}
			// 50,000 names of 200 bytes with their entries are over 10 MiB;
			// a batch is about 300 KiB. The sample counts what the other
			// tests of the package allocate meanwhile (up to 6 MiB seen
			// under a parallel make unit), so the bound sits between.
			if grew > 8<<20 {
				t.Errorf("the live heap grew by %d KiB during the walk", grew>>10)
			}
		})
	}
}

// liveHeapGrowth runs f and returns by how much the live heap, sampled
// after a collection while f runs, grew over what it was before.
func liveHeapGrowth(f func() error) (int64, error) {
	live := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := live()
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var p int64
		for {
			p = max(p, live())
			select {
			case <-done:
				peak <- p
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := f()
	close(done)
	return <-peak - before, err
}

// The tar stream of a directory that nothing writes in is the same at
// every read, whatever the reads in between did (a read moves a file's
// access time), a directory of more entries than a walk reads at once
// included; from an offset, it is the same stream's rest.
func TestTarDirFromAnOffset(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, data []byte) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 31)
	}
	write("a/big.bin", big)
	write("a/small.txt", []byte("small\n"))
	for i := range dirBatch + 100 {
		write(filepath.Join("many", fmt.Sprintf("f%05d", (i*7919)%(dirBatch+100))), []byte(strconv.Itoa(i)))
	}
	if err := os.Symlink("a/small.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	tarOf := func(offset int64) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := tarDir(root, offset, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	whole := tarOf(0)
	// Read every file, as the first reader's unpacking would not, but a
	// command of the worker might.
	if err := walkOut(root, func(p, _ string, fi fs.FileInfo) error {
		if fi.Mode().IsRegular() {
			_, err := os.ReadFile(p)
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if again := tarOf(0); !bytes.Equal(again, whole) {
		t.Fatalf("a second read of %d bytes differs from the first, of %d", len(again), len(whole))
	}
	n := int64(len(whole))
	for _, offset := range []int64{1, 511, 512, 513, 1024, 100 << 10, 300 << 10, n / 2, n - 1024, n - 1, n, n + 10} {
		got := tarOf(offset)
		want := whole[min(offset, n):]
		if !bytes.Equal(got, want) {
			t.Errorf("from offset %d: %d bytes that differ from the stream's last %d", offset, len(got), len(want))
		}
	}
}
