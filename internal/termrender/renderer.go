package termrender

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// activeLines is how many lines keep their text as code points at once. A
// multi-bar progress display redraws a few lines in turn; only a program that
// keeps rewriting more lines than this pays the length of each line it comes
// back to.
const activeLines = 16

// foldMax is the longest overwritten last line that a newline copies back
// into Renderer.buf; a longer one keeps its own storage, so that a cursor-up
// back to it copies nothing.
const foldMax = 4 << 10

// maxParam caps a CSI parameter: a cursor-up that far reaches the first line
// anyway, and an erase mode that large is no mode.
const maxParam = 1 << 30

type parseState uint8

const (
	ground   parseState = iota
	escStart            // after ESC
	escInter            // ESC and intermediate bytes (0x20–0x2F)
	csiParam            // ESC [ and parameter bytes (0x30–0x3F)
	csiInter            // ESC [, parameter bytes and intermediate bytes
	osc                 // ESC ] and the string so far
	oscEsc              // an ESC inside an OSC string: ST if '\' follows
)

// A Renderer renders output written to it piece by piece. Write takes the
// output in any pieces, even ones that cut an escape sequence or a UTF-8
// character; String gives what a terminal would show so far.
//
// The zero value is ready to use. A Renderer is not safe for concurrent use.
type Renderer struct {
	// buf holds the text of every line, each but the last followed by '\n';
	// starts[i] is where line i begins. A line in over keeps its text there
	// instead, and its part of buf is out of date.
	buf    []byte
	starts []int
	// lastCols is how many columns the last line's text in buf takes.
	lastCols int
	// over holds the lines but the last that keep their text out of buf:
	// lines that a cursor-up came back to.
	over map[int]*line
	// lastOver holds the last line's text while it is out of buf, having
	// been overwritten. A newline that starts a new line puts the text back
	// into buf, and keeps the line in spare to use again; a line longer than
	// foldMax goes to over instead.
	lastOver, spare *line
	// active holds the lines that keep code points, at most activeLines.
	active []*line
	tick   uint64

	row, col int

	state    parseState
	param    int
	paramBad bool // a parameter byte that is not a digit: ';', '?', …

	// held is a UTF-8 character cut at the end of the last write.
	held  [utf8.UTFMax]byte
	nheld int

	// shared says that String returned buf's bytes as they are, so buf must
	// be copied before any of them changes.
	shared bool

	// reach, when positive, bounds a cursor-up to reach lines above the last
	// line (a Stream's).
	reach int
}

// A line is the text of a line that lives outside Renderer.buf: its first
// columns as code points, so that overwriting them costs what changes, and
// the columns after those as UTF-8, as they were written.
type line struct {
	rs       []rune
	rest     []byte
	restCols int // columns of rest; -1 until counted
	active   bool
	used     uint64
}

// Write renders p. It never fails.
func (r *Renderer) Write(p []byte) (int, error) {
	r.init()
	n := len(p)
	if cap(r.buf)-len(r.buf) < len(p) {
		// The text rarely grows past its input; doubling copies less than
		// append's growth of large slices.
		r.buf = slices.Grow(r.buf, max(len(p), len(r.buf)))
	}
	if r.nheld > 0 {
		p = r.completeHeld(p)
	}
	r.feed(p)
	return n, nil
}

// WriteString is Write for a string.
func (r *Renderer) WriteString(s string) (int, error) {
	// The bytes are only read, never kept past the call.
	return r.Write(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// String returns the text as a terminal shows it now: lines joined by '\n'.
// An escape sequence not finished yet is left out, and a UTF-8 character not
// finished yet shows as U+FFFD for each of its bytes, as if the output ended
// here; the next write can still finish either.
func (r *Renderer) String() string {
	r.init()
	if len(r.over) == 0 && r.lastOver == nil && r.nheld == 0 {
		if len(r.buf) < cap(r.buf)/2 {
			return string(r.buf)
		}
		// As strings.Builder does; own copies buf before it changes.
		r.shared = true
		return unsafe.String(unsafe.SliceData(r.buf), len(r.buf))
	}
	last := len(r.starts) - 1
	rows := make([]int, 0, len(r.over)+2)
	size := len(r.buf)
	for row, ln := range r.over {
		rows = append(rows, row)
		size += len(ln.rs)*utf8.UTFMax + len(ln.rest)
	}
	slices.Sort(rows)
	if ln := r.lastOver; ln != nil {
		rows = append(rows, last)
		size += len(ln.rs)*utf8.UTFMax + len(ln.rest)
	}
	var cursor []byte
	if r.nheld > 0 {
		cursor = r.withHeld()
		size += len(cursor)
		if i, found := slices.BinarySearch(rows, r.row); !found {
			rows = slices.Insert(rows, i, r.row)
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	prev := 0
	for _, row := range rows {
		sb.Write(r.buf[prev:r.starts[row]])
		if row == r.row && r.nheld > 0 {
			sb.Write(cursor)
		} else {
			r.lineAt(row).writeTo(&sb)
		}
		if row < last {
			prev = r.starts[row+1] - 1
		} else {
			prev = len(r.buf)
		}
	}
	sb.Write(r.buf[prev:])
	return sb.String()
}

func (r *Renderer) init() {
	if r.starts == nil {
		r.starts = []int{0}
	}
}

// own copies buf if String shared it, before its bytes change. Appending
// needs no copy: a shared string ends where buf did.
func (r *Renderer) own() {
	if r.shared {
		r.buf = append(make([]byte, 0, cap(r.buf)), r.buf...)
		r.shared = false
	}
}

// completeHeld adds to the held character what p has of its rest and writes
// it once it is whole, or once p shows it never will be. It returns the rest
// of p.
func (r *Renderer) completeHeld(p []byte) []byte {
	for len(p) > 0 && p[0]&0xC0 == 0x80 && !utf8.FullRune(r.held[:r.nheld]) {
		r.held[r.nheld] = p[0]
		r.nheld++
		p = p[1:]
	}
	if len(p) > 0 || utf8.FullRune(r.held[:r.nheld]) {
		held := r.held[:r.nheld]
		r.nheld = 0
		r.plain(held)
	}
	return p
}

// controls marks the bytes that end a text run: '\n', '\r', '\b' and ESC.
var controls = [256]bool{'\n': true, '\r': true, '\b': true, 0x1b: true}

// shortRun is how far feed looks byte by byte for the end of a text run
// before it looks with bytes.IndexByte, which is faster on long runs.
const shortRun = 64

// feed parses p: text runs are written, controls and escape sequences
// applied.
func (r *Renderer) feed(p []byte) {
	// Where the next ESC, '\r' and '\b' are: -2 not looked for yet, -1 none.
	nextESC, nextCR, nextBS := -2, -2, -2
	for i := 0; i < len(p); {
		if r.state != ground {
			i = r.escape(p, i)
			continue
		}
		switch p[i] {
		case '\n':
			r.newline()
			i++
			continue
		case '\r':
			r.col = 0
			i++
			continue
		case '\b':
			if r.col > 0 {
				r.col--
			}
			i++
			continue
		case 0x1b:
			if k := r.csiWhole(p, i); k > 0 {
				i = k
			} else {
				r.state = escStart
				i++
			}
			continue
		}
		j, lim := i, min(len(p), i+shortRun)
		var high byte
		for j < lim && !controls[p[j]] {
			high |= p[j]
			j++
		}
		if j == lim && lim < len(p) {
			// A long run, which may hold newlines: it ends at the next ESC,
			// '\r' or '\b'.
			nextESC = nextIndex(p, j, 0x1b, nextESC)
			nextCR = nextIndex(p, j, '\r', nextCR)
			nextBS = nextIndex(p, j, '\b', nextBS)
			j = len(p)
			for _, k := range [...]int{nextESC, nextCR, nextBS} {
				if k >= 0 && k < j {
					j = k
				}
			}
			high = 0x80
		}
		run := p[i:j]
		if j == len(p) && high >= 0x80 {
			if k := cutCharLen(run); k > 0 {
				r.nheld = copy(r.held[:], run[len(run)-k:])
				run = run[:len(run)-k]
			}
		}
		if high < 0x80 && r.atEnd() {
			r.buf = append(r.buf, run...)
			r.lastCols += len(run)
			r.col = r.lastCols
		} else {
			r.plain(run)
		}
		i = j
	}
}

// csiWhole applies the CSI sequence at p[i] if p holds all of it, and
// returns where it ends; otherwise it returns 0 and escape parses it.
func (r *Renderer) csiWhole(p []byte, i int) int {
	j := i + 1
	if j >= len(p) || p[j] != '[' {
		return 0
	}
	param, bad := 0, false
	for j++; j < len(p) && p[j] >= 0x30 && p[j] <= 0x3F; j++ {
		if c := p[j]; c <= '9' {
			if param < maxParam {
				param = param*10 + int(c-'0')
			}
		} else {
			bad = true
		}
	}
	for j < len(p) && p[j] >= 0x20 && p[j] <= 0x2F {
		j++
	}
	if j == len(p) || p[j] < 0x40 || p[j] > 0x7E {
		return 0
	}
	r.param, r.paramBad = param, bad
	r.csi(p[j])
	return j + 1
}

// escape parses p[i], in an escape sequence, and returns where to go on.
func (r *Renderer) escape(p []byte, i int) int {
	c := p[i]
	switch r.state {
	case escStart:
		switch {
		case c == '[':
			r.state, r.param, r.paramBad = csiParam, 0, false
		case c == ']':
			r.state = osc
		case c >= 0x20 && c <= 0x2F:
			r.state = escInter
		case c >= 0x30 && c <= 0x7E:
			r.state = ground
		default:
			// Unfinished: dropped, and c is read again as text.
			r.state = ground
			return i
		}
	case escInter:
		switch {
		case c >= 0x20 && c <= 0x2F:
		case c >= 0x30 && c <= 0x7E:
			r.state = ground
		default:
			r.state = ground
			return i
		}
	case csiParam:
		switch {
		case c >= '0' && c <= '9':
			if r.param < maxParam {
				r.param = r.param*10 + int(c-'0')
			}
		case c >= 0x3A && c <= 0x3F:
			r.paramBad = true
		case c >= 0x20 && c <= 0x2F:
			r.state = csiInter
		case c >= 0x40 && c <= 0x7E:
			r.state = ground
			r.csi(c)
		default:
			r.state = ground
			return i
		}
	case csiInter:
		switch {
		case c >= 0x20 && c <= 0x2F:
		case c >= 0x40 && c <= 0x7E:
			r.state = ground
			r.csi(c)
		default:
			r.state = ground
			return i
		}
	case osc:
		for c != 0x07 && c != 0x1b && c != '\n' {
			if i++; i == len(p) {
				return i
			}
			c = p[i]
		}
		switch c {
		case 0x07:
			r.state = ground
		case 0x1b:
			r.state = oscEsc
		case '\n':
			r.state = ground
			return i
		}
	case oscEsc:
		if c == '\\' {
			r.state = ground
		} else {
			// The OSC string ended unfinished; this ESC starts anew.
			r.state = escStart
			return i
		}
	}
	return i + 1
}

// nextIndex returns where c next occurs in p at or after from, or -1; known
// is the last answer, reused while it is still ahead.
func nextIndex(p []byte, from int, c byte, known int) int {
	if known >= from || known == -1 {
		return known
	}
	k := bytes.IndexByte(p[from:], c)
	if k < 0 {
		return -1
	}
	return from + k
}

// cutCharLen returns how many bytes at the end of p are a UTF-8 character
// that is not whole yet.
func cutCharLen(p []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c&0xC0 == 0x80 {
			continue
		}
		if c >= 0xC0 && !utf8.FullRune(p[len(p)-k:]) {
			return k
		}
		return 0
	}
	return 0
}

func (r *Renderer) csi(final byte) {
	if r.paramBad {
		return
	}
	switch final {
	case 'A':
		r.row = max(r.top(), r.row-max(r.param, 1))
	case 'K':
		if r.param <= 2 {
			r.erase(r.param)
		}
	}
}

// plain writes p, text with no '\r', '\b' or ESC, at the cursor.
func (r *Renderer) plain(p []byte) {
	if !utf8.Valid(p) {
		p = validUTF8(p)
	}
	for len(p) > 0 {
		if r.atEnd() {
			r.appendAtEnd(p)
			return
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.put(p)
			return
		}
		if i > 0 {
			r.put(p[:i])
		}
		r.newline()
		p = p[i+1:]
	}
}

// atEnd says whether the cursor is at the end of the last line, and that
// line's text is in buf: what is written there is appended to buf.
func (r *Renderer) atEnd() bool {
	last := len(r.starts) - 1
	if r.row != last || r.col != r.lastCols {
		return false
	}
	return r.lastOver == nil
}

// appendAtEnd writes p, text with no '\r', '\b' or ESC, when atEnd.
func (r *Renderer) appendAtEnd(p []byte) {
	base := len(r.buf)
	r.buf = append(r.buf, p...)
	rest := p
	newLines := false
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		base += i + 1
		r.starts = append(r.starts, base)
		rest = rest[i+1:]
		newLines = true
	}
	if newLines {
		r.row = len(r.starts) - 1
		r.lastCols = 0
	}
	r.lastCols += runeCount(rest)
	r.col = r.lastCols
}

func (r *Renderer) newline() {
	r.row++
	r.col = 0
	if r.row == len(r.starts) {
		if ln := r.lastOver; ln != nil {
			r.lastOver = nil
			if len(ln.rs)*utf8.UTFMax+len(ln.rest) <= foldMax {
				r.buf = append(appendText(r.buf, ln.rs), ln.rest...)
				if ln.active {
					r.active = slices.DeleteFunc(r.active, func(a *line) bool { return a == ln })
				}
				*ln = line{rs: ln.rs[:0], rest: ln.rest[:0]}
				r.spare = ln
			} else {
				if r.over == nil {
					r.over = make(map[int]*line)
				}
				r.over[r.row-1] = ln
			}
		}
		r.buf = append(r.buf, '\n')
		r.starts = append(r.starts, len(r.buf))
		r.lastCols = 0
	}
}

// put writes p, UTF-8 text with no control that the renderer applies, at
// the cursor.
func (r *Renderer) put(p []byte) {
	cols := runeCount(p)
	col := r.col
	r.col += cols
	ln := r.lineAt(r.row)
	if ln == nil {
		if r.row == len(r.starts)-1 && r.putLast(col, p, cols) {
			return
		}
		ln = r.overLine(r.row)
	}
	n := ln.cols()
	end := col + cols
	switch {
	case col >= n:
		for range col - n {
			ln.rest = append(ln.rest, ' ')
		}
		ln.rest = append(ln.rest, p...)
		ln.restCols += col - n + cols
	case end >= n:
		// p covers the rest of the line, as a redrawn frame does: the line
		// becomes its first col columns, then p.
		if col > len(ln.rs) {
			r.split(ln, col)
		}
		ln.rs = ln.rs[:col]
		ln.rest = append(ln.rest[:0], p...)
		ln.restCols = cols
	case col >= len(ln.rs) && ln.restCols == len(ln.rest) && cols == len(p):
		// ASCII over ASCII: column i of rest is its byte i.
		copy(ln.rest[col-len(ln.rs):], p)
	default:
		r.split(ln, end)
		ln.rs = putRunes(ln.rs, col, p)
	}
}

// putLast writes p, of cols columns, at column col of the last line while
// its text is in buf. It reports false, changing nothing, when that needs
// code points: an overwrite that does not keep a byte for a column.
func (r *Renderer) putLast(col int, p []byte, cols int) bool {
	start := r.starts[len(r.starts)-1]
	n := r.lastCols
	if col >= n {
		for range col - n {
			r.buf = append(r.buf, ' ')
		}
		r.buf = append(r.buf, p...)
		r.lastCols = col + cols
		return true
	}
	end := col + cols
	r.own()
	if col == 0 && end >= n {
		// p covers the whole line, as a redrawn frame does.
		r.buf = append(r.buf[:start], p...)
		r.lastCols = cols
		return true
	}
	b := r.buf[start:]
	if n != len(b) {
		return false
	}
	// The line is ASCII: column i is byte i.
	switch {
	case cols == len(p) && end <= n:
		copy(b[col:], p)
	case end >= n:
		r.buf = append(r.buf[:start+col], p...)
		r.lastCols = end
	default:
		return false
	}
	return true
}

// erase applies ESC [ mode K, mode 0, 1 or 2, to the cursor's line.
func (r *Renderer) erase(mode int) {
	col := r.col
	ln := r.lineAt(r.row)
	if ln == nil {
		if r.row == len(r.starts)-1 && r.eraseLast(col, mode) {
			return
		}
		ln = r.overLine(r.row)
	}
	n := ln.cols()
	switch mode {
	case 0:
		if col >= n {
			return
		}
		r.split(ln, col)
		ln.rs = ln.rs[:col]
		ln.rest, ln.restCols = ln.rest[:0], 0
	case 1:
		end := min(col+1, n)
		r.split(ln, end)
		for i := range end {
			ln.rs[i] = ' '
		}
	case 2:
		ln.rs = ln.rs[:0]
		ln.rest, ln.restCols = ln.rest[:0], 0
	}
}

// eraseLast is erase for the last line while its text is in buf. It reports
// false, changing nothing, when that needs code points.
func (r *Renderer) eraseLast(col, mode int) bool {
	r.own()
	start := r.starts[len(r.starts)-1]
	n := r.lastCols
	ascii := n == len(r.buf)-start
	switch mode {
	case 0:
		if col >= n {
			return true
		}
		if !ascii {
			return false
		}
		r.buf = r.buf[:start+col]
		r.lastCols = col
	case 1:
		if !ascii {
			return false
		}
		b := r.buf[start:]
		for i := range min(col+1, n) {
			b[i] = ' '
		}
	case 2:
		r.buf = r.buf[:start]
		r.lastCols = 0
	}
	return true
}

// lineAt returns over's line for row, or nil.
func (r *Renderer) lineAt(row int) *line {
	if row == len(r.starts)-1 {
		return r.lastOver
	}
	if len(r.over) == 0 {
		return nil
	}
	return r.over[row]
}

// overLine moves the text of row out of buf into a line of its own.
func (r *Renderer) overLine(row int) *line {
	start := r.starts[row]
	if row == len(r.starts)-1 {
		r.own()
		ln := r.spare
		if ln == nil {
			ln = &line{}
		}
		r.spare = nil
		ln.rest = append(ln.rest[:0], r.buf[start:]...)
		ln.restCols = r.lastCols
		r.buf = r.buf[:start]
		r.lastCols = 0
		r.lastOver = ln
		return ln
	}
	if r.over == nil {
		r.over = make(map[int]*line)
	}
	ln := &line{rest: slices.Clone(r.buf[start : r.starts[row+1]-1]), restCols: -1}
	r.over[row] = ln
	return ln
}

// split moves the first c columns of ln (all of them if it has fewer) into
// its code points. Each column moves once, so this costs what the caller is
// about to change.
func (r *Renderer) split(ln *line, c int) {
	if !ln.active {
		r.activate(ln)
	}
	r.tick++
	ln.used = r.tick
	i := 0
	for k := c - len(ln.rs); k > 0 && i < len(ln.rest); k-- {
		ch := rune(ln.rest[i])
		size := 1
		if ch >= utf8.RuneSelf {
			ch, size = decodeValid(ln.rest[i:])
		}
		ln.rs = append(ln.rs, ch)
		i += size
		if ln.restCols > 0 {
			ln.restCols--
		}
	}
	ln.rest = ln.rest[i:]
}

// activate lets ln keep code points, and gives up those of the least
// recently used active line if there are too many.
func (r *Renderer) activate(ln *line) {
	if len(r.active) == activeLines {
		oldest := 0
		for i, a := range r.active {
			if a.used < r.active[oldest].used {
				oldest = i
			}
		}
		a := r.active[oldest]
		a.cols()
		a.restCols += len(a.rs)
		a.rest = append(appendText(make([]byte, 0, len(a.rs)+len(a.rest)), a.rs), a.rest...)
		a.rs, a.active = nil, false
		r.active = slices.Delete(r.active, oldest, oldest+1)
	}
	ln.active = true
	r.active = append(r.active, ln)
}

// withHeld returns the cursor's line as it would be with the held bytes
// written at the cursor, as if the output ended here.
func (r *Renderer) withHeld() []byte {
	var rs []rune
	if ln := r.lineAt(r.row); ln != nil {
		rs = appendRunes(nil, ln.text())
	} else {
		start := r.starts[r.row]
		end := len(r.buf)
		if r.row < len(r.starts)-1 {
			end = r.starts[r.row+1] - 1
		}
		rs = appendRunes(nil, r.buf[start:end])
	}
	for len(rs) < r.col {
		rs = append(rs, ' ')
	}
	for i := range r.nheld {
		if at := r.col + i; at < len(rs) {
			rs[at] = utf8.RuneError
		} else {
			rs = append(rs, utf8.RuneError)
		}
	}
	return appendText(nil, rs)
}

func (ln *line) cols() int {
	if ln.restCols < 0 {
		ln.restCols = runeCount(ln.rest)
	}
	return len(ln.rs) + ln.restCols
}

func (ln *line) text() []byte {
	if len(ln.rs) == 0 {
		return ln.rest
	}
	return append(appendText(nil, ln.rs), ln.rest...)
}

func (ln *line) writeTo(sb *strings.Builder) {
	for _, c := range ln.rs {
		if c < utf8.RuneSelf {
			sb.WriteByte(byte(c))
		} else {
			sb.WriteRune(c)
		}
	}
	sb.Write(ln.rest)
}

// putRunes writes p, UTF-8 text, at column col of rs, padding it with
// spaces up to col.
func putRunes(rs []rune, col int, p []byte) []rune {
	for len(rs) < col {
		rs = append(rs, ' ')
	}
	// Overwrite the columns there are, then append.
	over := rs[col:]
	i := 0
	for ; len(p) > 0 && i < len(over); i++ {
		c := rune(p[0])
		size := 1
		if c >= utf8.RuneSelf {
			c, size = decodeValid(p)
		}
		over[i] = c
		p = p[size:]
	}
	return appendRunes(rs, p)
}

// appendRunes appends the code points of p, UTF-8 text, to rs.
func appendRunes(rs []rune, p []byte) []rune {
	for len(p) > 0 {
		c := rune(p[0])
		size := 1
		if c >= utf8.RuneSelf {
			c, size = decodeValid(p)
		}
		rs = append(rs, c)
		p = p[size:]
	}
	return rs
}

// appendText appends rs to b as UTF-8.
func appendText(b []byte, rs []rune) []byte {
	for _, c := range rs {
		if c < utf8.RuneSelf {
			b = append(b, byte(c))
		} else {
			b = utf8.AppendRune(b, c)
		}
	}
	return b
}

// decodeValid decodes the character at the start of p, which is UTF-8 and
// does not start with ASCII: the renderer keeps only valid UTF-8, so this
// needs none of utf8.DecodeRune's checks.
func decodeValid(p []byte) (rune, int) {
	switch c := rune(p[0]); {
	case c < 0xE0:
		return c&0x1F<<6 | rune(p[1])&0x3F, 2
	case c < 0xF0:
		return c&0x0F<<12 | rune(p[1])&0x3F<<6 | rune(p[2])&0x3F, 3
	default:
		return c&0x07<<18 | rune(p[1])&0x3F<<12 | rune(p[2])&0x3F<<6 | rune(p[3])&0x3F, 4
	}
}

// runeCount returns how many characters p, UTF-8 text, holds: its bytes but
// the continuation bytes, counted eight at a time.
func runeCount(p []byte) int {
	n := len(p)
	i := 0
	for ; i+8 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		if w&0x8080808080808080 != 0 {
			// A continuation byte is 10xxxxxx: its top bit set, the next clear.
			n -= bits.OnesCount64(w &^ (w << 1) & 0x8080808080808080)
		}
	}
	for ; i < len(p); i++ {
		if p[i]&0xC0 == 0x80 {
			n--
		}
	}
	return n
}

// validUTF8 returns p with each byte that is not UTF-8 replaced by U+FFFD.
func validUTF8(p []byte) []byte {
	out := make([]byte, 0, len(p)+8)
	for len(p) > 0 {
		c, size := utf8.DecodeRune(p)
		if c == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, p[:size]...)
		}
		p = p[size:]
	}
	return out
}
