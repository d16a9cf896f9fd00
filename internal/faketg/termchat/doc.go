// Package termchat is the terminal chat of cmd/faketg: you type as a user
// of a fake Telegram, in its chats, and it prints what the bot does. It
// acts through the fake's control API (control.API), so it works alike
// on a fake in the same process and on one in a pod.
//
// Plain text is sent as the current user in the current chat; a line
// that starts with "/" is one of the chat's commands (the table in
// commands.go, which /help prints). NewWorld makes the users and chats
// the commands name.
//
//	ch := termchat.New(control.NewService(srv), termchat.Options{FilesDir: "files"}, os.Stdout)
//	if _, err := ch.Setup(ctx); err != nil { … }
//	err := ch.Run(ctx, os.Stdin, true)
package termchat
