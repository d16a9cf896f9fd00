// Package liveoutput keeps what a running command wrote, within fixed memory
// caps, for a live preview while it runs and for the final text once it
// ends.
//
// Producers write from any goroutine and are never held up for longer than
// a copy of their bytes, so a producer reads as fast as the command writes
// and a slow reader only ever sees a later tail. [Output.Changed] wakes one
// reader once per burst of writes, however many writes the burst holds.
//
// What is kept, as the reference (shell_stream.py of the Python ancestor)
// keeps it:
//
//   - per stream, the first 16 MiB and the last 16 MiB, with a line
//     "[… N bytes not kept …]" between them when anything was dropped;
//   - after a stop ([Output.MarkStopped]), at most 256 KiB more over both
//     streams; the rest is counted and reported in a last line
//     "[… N bytes written after the stop not kept …]";
//   - separately, the last 16 KiB of both streams together, in arrival
//     order, for previews.
//
// No cut splits a UTF-8 character: a cut moves to the nearest character
// boundary, and what it leaves out is counted as not kept. [Options] sets
// other caps.
//
// [Output.TailText] is the end of the output for a preview: invalid bytes
// show as U+FFFD, a character cut at either end is left out, and with
// rendering a window cut from a longer output starts at its first whole
// line. [Output.FinalText] is everything kept, for the final: each stream
// decoded whole and, with rendering, rendered on its own, stdout first;
// invalid bytes show as \xNN escapes.
package liveoutput
