package tgclient

import (
	"bytes"
	"context"
	"testing"

	"github.com/go-logr/zapr"
	gotdlog "github.com/gotd/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// gotd's debug lines (every RPC, with the messages' text) stay out of the
// bot's log at any verbosity, unless asked for.
func TestGotdLoggerLevel(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var out bytes.Buffer
		core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&out), zapcore.DebugLevel)
		g := gotdLogger(zapr.NewLogger(zap.New(core)), debug)
		g.Log(context.Background(), gotdlog.LevelDebug, "rpc call")
		g.Log(context.Background(), gotdlog.LevelInfo, "connected")
		if got := bytes.Contains(out.Bytes(), []byte("rpc call")); got != debug {
			t.Errorf("debug %v: the debug line logged: %v\n%s", debug, got, out.String())
		}
		if !bytes.Contains(out.Bytes(), []byte("connected")) {
			t.Errorf("debug %v: the info line not logged:\n%s", debug, out.String())
		}
	}
}
