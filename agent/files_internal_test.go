package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
			// a batch is about 300 KiB.
			if grew > 4<<20 {
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
