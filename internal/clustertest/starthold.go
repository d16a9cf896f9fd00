package clustertest

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// StartHold holds the operator's status writes that record a job's start
// while it is on (Options.OperatorClient: Layer): a client then reads the
// job before the record, as one quicker than the operator does. The
// agent has started the command by then; only its record waits.
type StartHold struct{ held atomic.Pointer[chan struct{}] }

// On holds the records from now until the release it returns.
func (h *StartHold) On() (release func()) {
	ch := make(chan struct{})
	h.held.Store(&ch)
	return sync.OnceFunc(func() {
		h.held.Store(nil)
		close(ch)
	})
}

// Layer puts the hold on the operator's client.
func (h *StartHold) Layer(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			// The operator patches the fields it changed, the start's
			// among them.
			if data, err := patch.Data(obj); err == nil && bytes.Contains(data, []byte(`"ran":true`)) {
				if ch := h.held.Load(); ch != nil {
					select {
					case <-*ch:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}
