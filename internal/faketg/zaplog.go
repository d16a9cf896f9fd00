package faketg

import (
	"context"

	"github.com/gotd/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger adapts zap to gotd's log.Logger (github.com/gotd/log/logzap is
// a module of its own, not in go.mod).
type zapLogger struct{ l *zap.Logger }

func zapLevel(l log.Level) zapcore.Level {
	switch {
	case l < log.LevelInfo:
		return zapcore.DebugLevel
	case l < log.LevelWarn:
		return zapcore.InfoLevel
	case l < log.LevelError:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}

func (z zapLogger) Enabled(_ context.Context, l log.Level) bool {
	return z.l.Core().Enabled(zapLevel(l))
}

func (z zapLogger) Log(_ context.Context, l log.Level, msg string, attrs ...log.Attr) {
	ce := z.l.Check(zapLevel(l), msg)
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, len(attrs))
	for _, a := range attrs {
		if a.Key == "" {
			for _, g := range a.Value.Group() {
				fields = append(fields, zap.Any(g.Key, g.Value.Any()))
			}
			continue
		}
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
	}
	ce.Write(fields...)
}
