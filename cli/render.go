package cli

import (
	"context"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"shelljob.dev/shelljob/internal/termrender"
)

const (
	renderLong = `Prints FILE, or the standard input, as a terminal would show it: the last
frame of a progress bar, no colours, lines erased and rewritten. It is how a
job's output shows in Telegram, in its preview and its final.

With --aligned, it first drops everything up to the first newline, as a
preview does with a tail cut from a longer output, unless only blanks follow.

It reads UTF-8 and writes UTF-8: bytes that are not UTF-8 show as U+FFFD.`

	renderExample = `  # Show the last frame of a download's progress.
  curl -o /dev/null https://example.com/big 2>&1 | kubectl shelljob render

  # Render a saved log.
  kubectl shelljob render build.log`
)

// RenderOptions are the options of the render command.
type RenderOptions struct {
	IOStreams
	// Aligned applies termrender.LineAligned before rendering.
	Aligned bool
	// File is what to render; "" or "-" is In.
	File string
}

// NewRenderCmd returns the render command.
func NewRenderCmd(streams IOStreams) *cobra.Command {
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
	var data []byte
	var err error
	if o.File == "" || o.File == "-" {
		data, err = io.ReadAll(o.In)
	} else {
		data, err = os.ReadFile(o.File)
	}
	if err != nil {
		return err
	}
	text := string(data)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if o.Aligned {
		text = termrender.LineAligned(text)
	}
	_, err = io.WriteString(o.Out, termrender.Render(text))
	return err
}
