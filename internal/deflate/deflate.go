// Package deflate compresses a stream of output piece by piece, each piece
// on its own, so that neither end keeps a compressor across pieces: the
// pieces of a follow over an agent's control channel
// (agentapi.ControlRequest's Deflate), and the gzip responses of the
// stream API. A command's output is mostly text, which DEFLATE's fastest
// level takes to a third or less; output that does not compress is sent
// as it is, and not tried again for a while.
package deflate

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

const (
	// giveUp is how many pieces go as they are after one of judgeBytes
	// or more that did not shrink by an eighth: output that does not
	// compress, such as compressed or random bytes, costs a try in
	// giveUp+1 pieces. A smaller piece is too short to judge by: a line
	// or a keepalive frame shrinks little, and says nothing of the next
	// burst of output.
	giveUp     = 32
	judgeBytes = 4 << 10
	// tryBytes is the shortest piece worth a try.
	tryBytes = 64
)

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // BestSpeed is a valid level
	return w
}}

// inflater is a reader of compressed pieces and its copy buffer.
type inflater struct {
	r   io.ReadCloser
	buf []byte
}

var inflaters = sync.Pool{New: func() any {
	return &inflater{r: flate.NewReader(bytes.NewReader(nil)), buf: make([]byte, 64<<10)}
}}

// Pieces compresses the pieces of one stream, and stops trying for a while
// when they do not compress. Its results are valid until its next call.
type Pieces struct {
	buf  bytes.Buffer
	skip int
}

// Piece returns p as raw DEFLATE (RFC 1951) if that saves an eighth of it
// or more, and whether it did; else p itself.
func (d *Pieces) Piece(p []byte) ([]byte, bool) {
	d.buf.Reset()
	if !d.deflate(p, true) {
		return p, false
	}
	return d.buf.Bytes(), true
}

// deflate writes p deflated to d.buf, unless it skips or p does not
// shrink: as a whole stream, or else as blocks that end on a byte and
// leave the stream open.
func (d *Pieces) deflate(p []byte, whole bool) bool {
	if len(p) < tryBytes {
		return false
	}
	if d.skip > 0 {
		d.skip--
		return false
	}
	start := d.buf.Len()
	w := deflaters.Get().(*flate.Writer)
	defer func() {
		// A pooled writer keeps no stream's buffer alive.
		w.Reset(io.Discard)
		deflaters.Put(w)
	}()
	w.Reset(&d.buf)
	_, err := w.Write(p)
	if whole {
		err = errors.Join(err, w.Close())
	} else {
		err = errors.Join(err, w.Flush())
	}
	if err != nil || d.buf.Len()-start > len(p)-len(p)/8 {
		d.buf.Truncate(start)
		if len(p) >= judgeBytes {
			d.skip = giveUp
		}
		return false
	}
	return true
}

// Gzip writes a gzip stream (RFC 1952) to W, each Write a run of DEFLATE
// blocks of its own that a reader decodes as soon as it arrives:
// compressed as Pieces does, or stored. Close ends the stream. It keeps no
// compressor between writes: a stream open for hours costs a few bytes.
type Gzip struct {
	W      io.Writer
	pieces Pieces
	crc    uint32
	size   uint32
	opened bool
}

// gzipHeader is a gzip member's header: DEFLATE, no flags, no time, from
// an unknown system.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// next is the buffer of the next write, the stream's header first.
func (g *Gzip) next() *bytes.Buffer {
	buf := &g.pieces.buf
	buf.Reset()
	if !g.opened {
		g.opened = true
		buf.Write(gzipHeader)
	}
	return buf
}

// Write writes p into the stream, whole.
func (g *Gzip) Write(p []byte) (int, error) {
	buf := g.next()
	if len(p) > 0 && !g.pieces.deflate(p, false) {
		stored(buf, p, false)
		// An empty block, as a flush ends with: a reader hands on what it
		// decoded before it looks for the next block.
		stored(buf, nil, false)
	}
	if _, err := g.W.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	g.crc = crc32.Update(g.crc, crc32.IEEETable, p)
	g.size += uint32(len(p))
	return len(p), nil
}

// Close ends the stream: a final empty block, and the trailer.
func (g *Gzip) Close() error {
	buf := g.next()
	stored(buf, nil, true)
	buf.Write(binary.LittleEndian.AppendUint32(nil, g.crc))
	buf.Write(binary.LittleEndian.AppendUint32(nil, g.size))
	_, err := g.W.Write(buf.Bytes())
	return err
}

// stored writes p as DEFLATE stored blocks, the last one final if final.
func stored(buf *bytes.Buffer, p []byte, final bool) {
	for {
		n := min(len(p), 0xffff)
		last := byte(0)
		if final && n == len(p) {
			last = 1
		}
		buf.WriteByte(last)
		buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(n)))
		buf.Write(binary.LittleEndian.AppendUint16(nil, ^uint16(n)))
		buf.Write(p[:n])
		if p = p[n:]; len(p) == 0 {
			return
		}
	}
}

// Inflate writes the piece p, which Piece compressed, to w.
func Inflate(w io.Writer, p []byte) error {
	in := inflaters.Get().(*inflater)
	defer inflaters.Put(in)
	if err := in.r.(flate.Resetter).Reset(bytes.NewReader(p), nil); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(w, in.r, in.buf); err != nil {
		return fmt.Errorf("inflate a piece: %w", err)
	}
	return nil
}
