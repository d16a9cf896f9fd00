package termrender_test

import (
	"fmt"

	"shelljob.dev/shelljob/internal/termrender"
)

func ExampleRender() {
	// A progress bar's frames, a colour, and a line erased and rewritten.
	out := "  0%|     |\r 60%|███  |\r100%|█████|\n" +
		"\x1b[32mok\x1b[0m\n" +
		"working...\r\x1b[Kdone\n"
	fmt.Print(termrender.Render(out))
	// Output:
	// 100%|█████|
	// ok
	// done
}

func ExampleRenderer() {
	var r termrender.Renderer
	// An escape sequence cut between two writes completes with the next.
	r.WriteString("downloading 10%\r\x1b[")
	r.WriteString("Kdownloaded")
	fmt.Println(r.String())
	// Output:
	// downloaded
}

func ExampleLineAligned() {
	// A tail cut from a longer output starts in the middle of a line.
	tail := "ng line\nstep 1\rstep 2\n"
	fmt.Printf("%q\n", termrender.Render(termrender.LineAligned(tail)))

	// The end of one long line is kept whole.
	fmt.Printf("%q\n", termrender.LineAligned(`…"key":"value"}`+"\n"))
	// Output:
	// "step 2\n"
	// "…\"key\":\"value\"}\n"
}
