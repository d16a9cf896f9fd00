package liveoutput

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkWrite writes 4 KiB chunks from 8 goroutines, half of them to
// each stream, with the default caps: after the first 16 MiB of a stream
// every write goes to its tail. hack/bench.sh reports it in MiB/s.
func BenchmarkWrite(b *testing.B) {
	chunk := bytes.Repeat([]byte("0123456789abcd\xc3\xa9\n"), 4096/17+1)[:4096]
	for _, bc := range []struct {
		name   string
		reader bool
	}{
		{"4KiB_chunks_8_goroutines", false},
		{"4KiB_chunks_8_goroutines_with_preview_reader", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := New(Options{})
			b.SetBytes(int64(len(chunk)))
			done := make(chan struct{})
			var reads sync.WaitGroup
			if bc.reader {
				reads.Add(1)
				go func() {
					defer reads.Done()
					for {
						select {
						case <-o.Changed():
							_ = o.TailText(3496, true)
						case <-done:
							return
						}
					}
				}()
			}
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						o.Write(Stream(w%2), chunk)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(done)
			reads.Wait()
		})
	}
}

// BenchmarkTailText renders a full 16 KiB preview window of progress bars
// and coloured lines, as each preview edit does.
func BenchmarkTailText(b *testing.B) {
	o := New(Options{})
	for i := range 2000 {
		o.Write(Stdout, []byte("\x1b[32mok\x1b[0m step "))
		o.Write(Stdout, []byte{'0' + byte(i%10), '\r', '\n'})
		o.Write(Stderr, []byte("\r 50%|█████     |\r100%|██████████|\n"))
	}
	b.SetBytes(DefaultPreviewBytes)
	for b.Loop() {
		_ = o.TailText(3496, true)
	}
}
