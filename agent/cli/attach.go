package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/pty"
)

// attach relays the exec's terminal to a console (agent.Client.Attach) and
// exits with the exit status of the console's command. On a terminal, it
// puts it in raw mode, so that every key goes to the console as it is
// typed, and sends its size at the start and after each SIGWINCH. A hangup
// or a signal to end ends the attach, and so hangs the console up. With
// --session, a hangup of that name kills it.
func attach(e *env, args []string) error {
	fs := e.jobFlags()
	session := fs.String("session", "", "the attach's name, for the hangup that ends it")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	var sizes chan agent.WindowSize
	if tty := terminal(e.stdin, e.stdout); tty != nil {
		if in := terminal(e.stdin); in != nil {
			if state, err := term.MakeRaw(int(in.Fd())); err == nil {
				defer func() { _ = term.Restore(int(in.Fd()), state) }()
			}
		}
		sizes = make(chan agent.WindowSize, 1)
		go followSize(ctx, tty, sizes)
	}
	code, err := c.AttachSession(ctx, e.job, *session, e.stdin, e.stdout, sizes)
	if err != nil {
		return err
	}
	return exitStatus(code)
}

// terminal returns the first of streams that is a terminal, or nil.
func terminal(streams ...any) *os.File {
	for _, s := range streams {
		if f, ok := s.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return f
		}
	}
	return nil
}

// followSize sends the size of tty to sizes, at once and after each
// SIGWINCH, until ctx ends; a size not taken yet gives way to the newer.
func followSize(ctx context.Context, tty *os.File, sizes chan agent.WindowSize) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		// A terminal not sized yet (an exec's, before its client's first
		// resize) says 0x0: its SIGWINCH brings the size.
		if rows, cols, err := pty.Size(tty); err == nil && rows > 0 && cols > 0 {
			select {
			case <-sizes:
			default:
			}
			sizes <- agent.WindowSize{Rows: rows, Cols: cols}
		}
		select {
		case <-winch:
		case <-ctx.Done():
			return
		}
	}
}
