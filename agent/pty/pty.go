package pty

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Open opens a new pseudo-terminal. The master is read and written through
// Go's poller, so that Close ends a blocked Read; the slave, the terminal
// side, blocks, as a program's standard streams do. Neither is anyone's
// controlling terminal.
func Open() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	var n int
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return err
		}
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock a pseudo-terminal: %w", err)
	}
	name := "/dev/pts/" + strconv.Itoa(n)
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	return master, os.NewFile(uintptr(fd), name), nil
}

// SetSize sets the size of the terminal of f, its master or its slave: the
// kernel sends the terminal's foreground process group SIGWINCH when it
// changes.
func SetSize(f *os.File, rows, cols uint16) error {
	return control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// Size returns the size of the terminal of f.
func Size(f *os.File) (rows, cols uint16, err error) {
	err = control(f, func(fd int) error {
		ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		if err == nil {
			rows, cols = ws.Row, ws.Col
		}
		return err
	})
	return rows, cols, err
}

// control runs do on f's descriptor without f.Fd, which would take f out
// of the poller and make it block.
func control(f *os.File, do func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var doErr error
	if err := rc.Control(func(fd uintptr) { doErr = do(int(fd)) }); err != nil {
		return err
	}
	return doErr
}
