// Command kubectl-shelljob is the kubectl plugin of shelljob; see package
// cli. kubectl finds it on PATH: `kubectl shelljob ...`.
package main

import (
	"os"

	"shelljob.dev/shelljob/cli"
)

func main() {
	os.Exit(cli.Main(cli.NewDefaultCmd(), os.Stderr))
}
