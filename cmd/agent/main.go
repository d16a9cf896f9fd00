// Command shelljob-agent is PID 1 of every worker pod: the daemon that runs
// shell jobs, and the thin clients that callers exec in the pod. See
// internal/agentapi for the contract and agent/cli for the flags.
package main

import (
	"os"

	"shelljob.dev/shelljob/agent/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
