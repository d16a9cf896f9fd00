// Package cli is kubectl-shelljob, the kubectl plugin that gives terminal
// users the jobs that the Telegram bot gives chat admins.
//
// [NewCmd] builds the root command from [Options]; each subcommand lives in
// a file of its own, with options that Complete reads from the command line
// and Run carries out.
package cli
