package faketg

import (
	"github.com/gotd/log"
	"go.uber.org/zap"
)

// GotdLogger adapts zap for gotd, for the tests' bots.
func GotdLogger(l *zap.Logger) log.Logger { return zapLogger{l} }
