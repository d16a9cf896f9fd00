package cli

import (
	"io"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger logs JSON lines to w through zap, as the operator and the bot
// do with controller-runtime's zap.New and its production defaults; v is
// the highest logr V-level shown. That package itself would bring
// apimachinery's runtime into every subcommand a caller execs (2.7 MB more
// binary, 2.5 ms more at each start), so its defaults are repeated here.
func newLogger(w io.Writer, v int) logr.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339TimeEncoder
	sink := zapcore.AddSync(w)
	level := zap.NewAtomicLevelAt(zapcore.Level(-v))
	opts := []zap.Option{zap.ErrorOutput(sink), zap.AddStacktrace(zapcore.ErrorLevel)}
	// controller-runtime samples unless V(2) is on.
	if !level.Enabled(zapcore.Level(-2)) {
		opts = append(opts, zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return zapcore.NewSamplerWithOptions(c, time.Second, 100, 100)
		}))
	}
	return zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), sink, level), opts...))
}
