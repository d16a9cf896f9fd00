package botmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"shelljob.dev/shelljob/bot/botmetrics"
)

// failing is an invoker whose calls return err.
func failing(err error) tg.Invoker {
	return telegram.InvokeFunc(func(context.Context, bin.Encoder, bin.Decoder) error { return err })
}

func observations(t *testing.T, method string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := botmetrics.CallDuration.WithLabelValues(method).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// notTL is a request without a TL name.
type notTL struct{}

func (notTL) Encode(*bin.Buffer) error { return nil }

func TestInvoker(t *testing.T) {
	const edit = "messages.editMessage"
	for _, tc := range []struct {
		name     string
		input    bin.Encoder
		err      error
		method   string
		errType  string // "" for none
		floodSec float64
	}{
		{name: "ok", input: &tg.MessagesEditMessageRequest{}, method: edit},
		{name: "rpc error", input: &tg.MessagesEditMessageRequest{}, err: tgerr.New(400, "MESSAGE_NOT_MODIFIED"), method: edit, errType: "MESSAGE_NOT_MODIFIED"},
		{name: "flood wait, wrapped", input: &tg.MessagesSendMessageRequest{}, err: fmt.Errorf("send: %w", tgerr.New(420, "FLOOD_WAIT_7")),
			method: "messages.sendMessage", errType: "FLOOD_WAIT", floodSec: 7},
		{name: "slow mode", input: &tg.MessagesSendMessageRequest{}, err: tgerr.New(420, "SLOWMODE_WAIT_3"),
			method: "messages.sendMessage", errType: "SLOWMODE_WAIT", floodSec: 3},
		{name: "canceled", input: &tg.MessagesSetTypingRequest{}, err: context.Canceled, method: "messages.setTyping", errType: "canceled"},
		{name: "timeout", input: &tg.MessagesSetTypingRequest{}, err: fmt.Errorf("call: %w", context.DeadlineExceeded), method: "messages.setTyping", errType: "timeout"},
		{name: "client error", input: &tg.UpdatesGetStateRequest{}, err: errors.New("engine was closed"), method: "updates.getState", errType: "other"},
		{name: "no TL name", input: notTL{}, method: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := observations(t, tc.method)
			var errs float64
			if tc.errType != "" {
				errs = testutil.ToFloat64(botmetrics.CallErrors.WithLabelValues(tc.method, tc.errType))
			}
			floods := testutil.ToFloat64(botmetrics.FloodWaits.WithLabelValues(tc.method))
			floodSec := testutil.ToFloat64(botmetrics.FloodWaitSeconds.WithLabelValues(tc.method))

			if err := botmetrics.Invoker(failing(tc.err)).Invoke(context.Background(), tc.input, nil); !errors.Is(err, tc.err) {
				t.Fatalf("Invoke = %v, want %v", err, tc.err)
			}
			if got := observations(t, tc.method) - calls; got != 1 {
				t.Errorf("%s timed %d more times, want 1", tc.method, got)
			}
			if tc.errType != "" {
				if got := testutil.ToFloat64(botmetrics.CallErrors.WithLabelValues(tc.method, tc.errType)) - errs; got != 1 {
					t.Errorf("%s errors of type %s: %v more, want 1", tc.method, tc.errType, got)
				}
			}
			wantFloods := 0.0
			if tc.floodSec > 0 {
				wantFloods = 1
			}
			if got := testutil.ToFloat64(botmetrics.FloodWaits.WithLabelValues(tc.method)) - floods; got != wantFloods {
				t.Errorf("flood waits: %v more, want %v", got, wantFloods)
			}
			if got := testutil.ToFloat64(botmetrics.FloodWaitSeconds.WithLabelValues(tc.method)) - floodSec; got != tc.floodSec {
				t.Errorf("flood wait seconds: %v more, want %v", got, tc.floodSec)
			}
		})
	}
}
