package liveoutput_test

import (
	"fmt"

	"shelljob.dev/shelljob/internal/liveoutput"
)

func ExampleOutput() {
	out := liveoutput.New(liveoutput.Options{})

	// A producer writes as the command writes, from any goroutine.
	fmt.Fprint(out.Writer(liveoutput.Stdout), "fetching  0%\rfetching 50%\rfetching 100%\n")
	out.Write(liveoutput.Stderr, []byte("warning: \xff in a name\n"))

	// A reader wakes once for the whole burst, and shows the end.
	<-out.Changed()
	fmt.Printf("preview: %q\n", out.TailText(3496, true))
	fmt.Printf("final:   %q\n", out.FinalText(true))
	fmt.Println("bytes:", out.Written(liveoutput.Stdout), out.Written(liveoutput.Stderr))
	// Output:
	// preview: "fetching 100%\nwarning: � in a name\n"
	// final:   "fetching 100%\nwarning: \\xff in a name\n"
	// bytes: 40 21
}

func ExampleOutput_MarkStopped() {
	out := liveoutput.New(liveoutput.Options{HeadBytes: 7, TailBytes: 13, AfterStopBytes: 6})
	out.Write(liveoutput.Stdout, []byte("line 1\nline 2\nline 3\nline 4\n"))
	out.MarkStopped()
	out.Write(liveoutput.Stdout, []byte("bye!\nand more\n"))
	fmt.Print(out.FinalText(false))
	// Output:
	// line 1
	//
	// [… 14 bytes not kept …]
	// line 4
	// bye!
	// a
	// [… 8 bytes written after the stop not kept …]
}
