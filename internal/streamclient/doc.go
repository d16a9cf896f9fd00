// Package streamclient is the client of the stream.shelljob.dev API
// (internal/streamapi) for the bot and kubectl shelljob: a job's output
// from a byte offset, resumed from the offset reached after a cut (a
// restart of the operator replica that served it, a broken connection);
// its final text; its files out, resumed the same way (the API server
// cuts a files request after its request timeout), and in; and an attach
// to a console. Options.Own chooses the resource: myshelljobs, the
// caller's own jobs, or shelljobs, any job RBAC allows.
//
// A stream that moves no byte, keepalives included, for
// Options.StreamIdle is cut (agentapi.ErrStreamIdle) and, for a follow,
// resumed: the server's keepalives keep a silent command's follow moving.
// A refusal (Forbidden, NotFound, BadRequest) ends a call at once, and a
// job whose output is lost (410 Gone: its worker is gone) ends it with
// ErrOutputLost.
package streamclient
