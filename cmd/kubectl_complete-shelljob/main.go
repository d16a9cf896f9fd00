// Command kubectl_complete-shelljob gives kubectl's shell completion the
// completions of the shelljob plugin: kubectl runs it, found on PATH, for
// `kubectl shelljob <TAB>`.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"shelljob.dev/shelljob/cli"
)

func main() {
	cmd := cli.NewDefaultCmd()
	cmd.SetArgs(append([]string{cobra.ShellCompRequestCmd}, os.Args[1:]...))
	os.Exit(cli.Main(cmd, os.Stderr))
}
