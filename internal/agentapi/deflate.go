package agentapi

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"sync"
)

// A follow over the control channel may carry its pieces compressed: the
// caller asks with ControlRequest.Deflate, and the agent sends a piece as
// raw DEFLATE (RFC 1951) with ControlMessage.Deflated when that makes it
// smaller. Every byte of a follow crosses the pod's exec stream, the
// kubelet and the API server, base64 in JSON, and a command's output is
// mostly text, which DEFLATE's fastest level takes to a third or less.
// Each piece is compressed on its own, so a reader needs no state across
// pieces and an agent needs none across follows.

// deflateGiveUp is how many pieces a follow sends as they are after one
// that did not shrink by an eighth: output that does not compress, such
// as compressed or random bytes, costs a try in deflateGiveUp+1 pieces.
const deflateGiveUp = 32

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

// PieceDeflater compresses the pieces of one follow, and stops trying for a
// while when they do not compress.
type PieceDeflater struct {
	buf  bytes.Buffer
	skip int
}

// Piece returns p, compressed if that saves an eighth of it or more, and
// whether it is compressed. The result is valid until the next call.
func (d *PieceDeflater) Piece(p []byte) ([]byte, bool) {
	if d.skip > 0 {
		d.skip--
		return p, false
	}
	d.buf.Reset()
	w := deflaters.Get().(*flate.Writer)
	defer deflaters.Put(w)
	w.Reset(&d.buf)
	if _, err := w.Write(p); err != nil || w.Close() != nil || d.buf.Len() > len(p)-len(p)/8 {
		d.skip = deflateGiveUp
		return p, false
	}
	return d.buf.Bytes(), true
}

// Inflate writes the piece p, which Piece compressed, to w.
func Inflate(w io.Writer, p []byte) error {
	in := inflaters.Get().(*inflater)
	defer inflaters.Put(in)
	if err := in.r.(flate.Resetter).Reset(bytes.NewReader(p), nil); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(w, in.r, in.buf); err != nil {
		return fmt.Errorf("inflate a follow's piece: %w", err)
	}
	return nil
}
