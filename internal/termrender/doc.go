// Package termrender shows a program's output as a terminal would, as plain
// text, so that a progress bar shows its last frame rather than every frame
// in a row.
//
// It follows the reference renderer (term_render.py of the Python ancestor)
// exactly:
//
//   - '\r' moves to column 0, and later characters overwrite from there
//     ("abcdef\rXY" renders "XYcdef");
//   - '\n' moves down a line and to column 0: onto a line that already exists
//     after a cursor-up, otherwise a new one;
//   - '\b' moves back one column, never past column 0;
//   - SGR (ESC [ … m, colours and styles) is removed;
//   - ESC [ K erases to the end of the line (also ESC [ 0 K), ESC [ 1 K blanks
//     the line from its start through the cursor, and ESC [ 2 K empties it;
//   - ESC [ n A moves the cursor up n lines (default 1, never above the first
//     line), as multi-bar progress displays do; the column stays;
//   - K and A with a private or multi-part parameter (ESC [ ? 1 A, ESC [ 1 ; 2 K)
//     do nothing;
//   - every other CSI sequence, OSC strings (a window title, a hyperlink;
//     ended by BEL or ESC \) and the short escape sequences such as ESC ( B
//     are dropped.
//
// Every other character, control characters and tabs included, is written as
// it is, one column each: wide characters and tabs are not expanded. There is
// no screen and no cursor addressing beyond the above. A write past the end
// of a line pads it with spaces. A byte that is not UTF-8 becomes U+FFFD, one
// column.
//
// [Render] renders a whole text; text with no '\r', '\b' or ESC is returned
// unchanged. A [Renderer] does the same piece by piece: an escape sequence or
// a UTF-8 character cut at the end of one write completes with the next. An
// escape sequence still unfinished at the end is dropped, and a character
// still unfinished shows as U+FFFD for each of its bytes. The result does not
// depend on how the input is split into writes.
//
// [LineAligned] cuts a tail of a longer output to its first whole line, so
// that a '\r' or a cursor-up at its start acts inside the tail.
//
// Rendering costs time linear in the input. A line is kept as bytes while it
// is appended to, or rewritten from a column to its end as a progress bar's
// frames are; a line overwritten in its middle keeps the columns written so
// far as code points and the rest as bytes, so a write, an overwrite after
// '\r' or '\b' and an erase cost what they change, not the length of the
// line. Up to 16 lines keep code points at once, so a progress display
// redrawn under a long line never copies that line again.
//
// Only padding grows faster than the input, as in the reference: a
// cursor-up from the end of a long line and one character pad the line
// above to that column, so a contrived output can render far larger than it
// is.
package termrender
