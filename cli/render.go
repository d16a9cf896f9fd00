package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"unicode/utf8"
	"unsafe"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/termrender"
)

const (
	renderLong = `Prints FILE, or the standard input, as a terminal would show it: the last
frame of a progress bar, no colours, lines erased and rewritten. It is how a
job's output shows in Telegram, in its preview and its final.

With --aligned, it first drops everything up to the first newline, as a
preview does with a tail cut from a longer output, unless only blanks follow.

It reads UTF-8 and writes UTF-8: bytes that are not UTF-8 show as \xNN
escapes, as in the chat's final.`

	renderExample = `  # Show the last frame of a download's progress.
  curl -o /dev/null https://example.com/big 2>&1 | kubectl shelljob render

  # Render a saved log.
  kubectl shelljob render build.log`
)

// RenderOptions are the options of the render command.
type RenderOptions struct {
	genericiooptions.IOStreams
	// Aligned applies termrender.LineAligned before rendering.
	Aligned bool
	// File is what to render; "" or "-" is In.
	File string
}

// NewRenderCmd returns the render command.
func NewRenderCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := &RenderOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:                   "render [--aligned] [FILE]",
		DisableFlagsInUseLine: true,
		Short:                 "Print output as a terminal would show it",
		Long:                  renderLong,
		Example:               renderExample,
		Args:                  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true
			if err := o.Complete(args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Aligned, "aligned", false,
		"start at the first whole line, as a preview of a cut output does")
	return cmd
}

// Complete takes FILE from the arguments.
func (o *RenderOptions) Complete(args []string) error {
	if len(args) > 0 {
		o.File = args[0]
	}
	return nil
}

// Run renders the input to Out.
func (o *RenderOptions) Run(context.Context) error {
	data, err := o.read()
	if err != nil {
		return err
	}
	// The text shares data's memory: the input can be large, and data is
	// not used again.
	text := unsafe.String(unsafe.SliceData(data), len(data))
	if !utf8.Valid(data) {
		text = liveoutput.DecodeEscape(data)
	}
	if o.Aligned {
		text = termrender.LineAligned(text)
	}
	_, err = io.WriteString(o.Out, termrender.Render(text))
	return err
}

// read reads the whole input, into a buffer of its size when it is a
// regular file, so that it is not grown and copied on the way.
func (o *RenderOptions) read() ([]byte, error) {
	if o.File != "" && o.File != "-" {
		return os.ReadFile(o.File)
	}
	if f, ok := o.In.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
			_, err := buf.ReadFrom(f)
			return buf.Bytes(), err
		}
	}
	return io.ReadAll(o.In)
}
