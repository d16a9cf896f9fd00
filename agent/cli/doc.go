// Package cli is the shelljob-agent command line: the daemon (serve, the
// default) and the thin clients that callers run through pod exec, as
// internal/agentapi describes them. cmd/agent calls Main; tests call it from
// a re-executed test binary.
package cli
