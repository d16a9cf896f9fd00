// Package outfiles caps the files a command leaves in $SHELLJOB_OUT as its
// clients, the bot and kubectl shelljob, take them from the agent's tar
// stream (agentapi.Client.GetFiles): at most Limits.Count files a job, up
// to Limits.File bytes each and Limits.Job bytes a job.
//
// [Tally] is the decision, file by file in the stream's order; [Read]
// walks a tar stream through it and hands each file it takes to its
// caller as a stream, so that no file is ever held whole in memory, and
// neither is the list of the files left out: it names at most MaxListed
// of them and counts the rest. The package does no I/O of its own.
package outfiles
