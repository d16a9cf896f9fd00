package cli

import (
	"encoding/base64"
	"errors"
	"io"

	"golang.org/x/term"
)

// fder is a stream backed by a file descriptor, such as *os.File.
type fder interface{ Fd() uintptr }

// isTerminal tells whether s is a terminal. Buffers and pipes are not.
func isTerminal(s any) bool {
	f, ok := s.(fder)
	return ok && term.IsTerminal(int(f.Fd()))
}

// kittyChunk is the most base64 bytes the kitty graphics protocol takes in
// one escape sequence.
const kittyChunk = 4096

// writeKitty shows a PNG image inline with the kitty graphics protocol, but
// only when w is a terminal: in a file or a pipe the escape sequences
// would be a blob of base64 in the captured output. It reports whether it
// wrote anything.
func writeKitty(w io.Writer, png io.Reader) (bool, error) {
	if !isTerminal(w) {
		return false, nil
	}
	return true, kittyEscapes(w, png)
}

// kittyEscapes writes png as the kitty graphics protocol's escape
// sequences, kittyChunk bytes of base64 each, as it reads it.
func kittyEscapes(w io.Writer, png io.Reader) error {
	const raw = kittyChunk / 4 * 3 // the bytes of one chunk's base64
	cur, next := make([]byte, raw), make([]byte, raw)
	n, err := readChunk(png, cur)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		m := 0
		if n == raw {
			if m, err = readChunk(png, next); err != nil {
				return err
			}
		}
		more := "0"
		if m > 0 {
			more = "1"
		}
		head := "\x1b_Gm=" + more
		if first {
			head = "\x1b_Gf=100,a=T,m=" + more
		}
		if _, err := io.WriteString(w, head+";"+base64.StdEncoding.EncodeToString(cur[:n])+"\x1b\\"); err != nil {
			return err
		}
		if m == 0 {
			break
		}
		cur, next, n = next, cur, m
	}
	_, err = io.WriteString(w, "\n")
	return err
}

// readChunk fills buf from r as far as r goes, and returns how much.
func readChunk(r io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(r, buf)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	return n, err
}
