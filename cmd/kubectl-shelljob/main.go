// Command kubectl-shelljob is the kubectl plugin of shelljob; see package
// cli.
package main

import (
	"os"

	"shelljob.dev/shelljob/cli"
)

func main() {
	if err := cli.NewDefaultCmd().Execute(); err != nil {
		os.Exit(1)
	}
}
