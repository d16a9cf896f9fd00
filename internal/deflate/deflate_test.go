package deflate

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"io"
	"os"
	"strings"
	"testing"
)

var listing = []byte(strings.Repeat("total 48\ndrwxr-xr-x 2 shell shell 4096 Dec  5 04:40 .\n", 500))

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestPieces: text is sent compressed and inflates back whole; random
// bytes are sent as they are, and the pieces after them are not tried
// for giveUp pieces.
func TestPieces(t *testing.T) {
	var d Pieces
	z, deflated := d.Piece(listing)
	if !deflated || len(z) > len(listing)/4 {
		t.Fatalf("text: deflated %v, %d bytes of %d", deflated, len(z), len(listing))
	}
	var back bytes.Buffer
	if err := Inflate(&back, z); err != nil || !bytes.Equal(back.Bytes(), listing) {
		t.Fatalf("text inflated to %d bytes, %v", back.Len(), err)
	}

	random := randomBytes(32 << 10)
	if p, deflated := d.Piece(random); deflated || !bytes.Equal(p, random) {
		t.Fatalf("random bytes: deflated %v, %d bytes", deflated, len(p))
	}
	for i := range giveUp {
		if _, deflated := d.Piece(listing); deflated {
			t.Fatalf("piece %d after random bytes was tried", i)
		}
	}
	if _, deflated := d.Piece(listing); !deflated {
		t.Error("text after the pause is not deflated")
	}

	// Short pieces that do not shrink are sent as they are, and leave the
	// next ones tried.
	d = Pieces{}
	for _, short := range [][]byte{[]byte("x"), random[:100], random[:judgeBytes-1]} {
		if p, deflated := d.Piece(short); deflated || !bytes.Equal(p, short) {
			t.Fatalf("%d random bytes: deflated %v", len(short), deflated)
		}
	}
	if _, deflated := d.Piece(listing); !deflated {
		t.Error("text after short pieces that did not shrink is not deflated")
	}

	if err := Inflate(&back, []byte("not deflate")); err == nil {
		t.Error("a corrupt piece inflated")
	}
}

// TestGzip: pieces, compressed or stored (random bytes, and pieces longer
// than a stored block), read back as one gzip stream, each as soon as it
// was written, before the next one comes.
func TestGzip(t *testing.T) {
	pieces := [][]byte{listing, randomBytes(200 << 10), listing, []byte("x"), {}, listing}
	// A pipe with a buffer, as a connection has: the end of a write that
	// the reader needs no more of waits there for the next one.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var counted int64
	next := make(chan bool)
	g := &Gzip{W: writerFunc(func(p []byte) (int, error) {
		counted += int64(len(p))
		return w.Write(p)
	})}
	go func() {
		for _, p := range pieces {
			if _, err := g.Write(p); err != nil {
				return
			}
			if !<-next {
				return
			}
		}
		if err := g.Close(); err != nil {
			t.Error(err)
		}
		w.Close()
	}()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pieces {
		got := make([]byte, len(p))
		if _, err := io.ReadFull(zr, got); err != nil || !bytes.Equal(got, p) {
			next <- false
			t.Fatalf("piece %d: %v", i, err)
		}
		next <- true
	}
	if rest, err := io.ReadAll(zr); err != nil || len(rest) != 0 {
		t.Fatalf("after the pieces: %d bytes, %v", len(rest), err)
	}
	// After the random bytes, the listings are not tried: stored, they
	// cost a few bytes more than they hold.
	if raw := int64(200<<10 + 3*len(listing) + 1); counted > raw+1024 {
		t.Errorf("%d bytes for %d of pieces", counted, raw)
	}
	var text bytes.Buffer
	fresh := &Gzip{W: &text}
	if _, err := fresh.Write(listing); err != nil || text.Len() > len(listing)/4 {
		t.Errorf("a listing took %d bytes of %d, %v", text.Len(), len(listing), err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
