// Package spool keeps a command's output on disk under the caps of the
// reference's live output: the first HeadBytes and the last TailBytes, and
// after a stop at most AfterStopBytes more. Cuts never split a UTF-8
// character.
//
// One goroutine writes (the producer, which reads the command's pipe);
// Write never waits for readers, so the command is never slowed by them.
// Any number of readers Follow the output from a byte offset while it is
// written and after it is closed.
//
// Offsets count the bytes the command wrote, kept or not. The output is
// stored in files of ChunkBytes each, named by their first offset; the
// dropped middle is whole files deleted once they fall out of the tail, so
// a reader that falls behind finds a gap and is told how many bytes it
// missed. When the spool is closed, the tail is trimmed to exactly
// TailBytes (moved forward to a character start), and a follow from 0 then
// gives exactly what was kept.
package spool
