package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/internal/agentapi"
)

// Pods is an agentapi.Client for daemons on this machine, one per pod, so
// that the agent's callers can test against real agents without a cluster.
type Pods struct {
	// Socket is the socket of pod's daemon.
	Socket func(pod types.NamespacedName) string
	// StreamIdle, when positive, cuts a follow, put-files or get-files
	// stream that moved no byte for that long while it waited on the
	// daemon, with agentapi.ErrStreamIdle, as an exec client does.
	StreamIdle time.Duration
}

var _ agentapi.Client = Pods{}

func (p Pods) client(pod types.NamespacedName) *Client {
	return &Client{socket: p.Socket(pod), idle: p.StreamIdle}
}

// Start implements agentapi.Client.
func (p Pods) Start(ctx context.Context, pod types.NamespacedName, req agentapi.StartRequest) (agentapi.StartResponse, error) {
	r, err := p.client(pod).Start(ctx, req)
	if err != nil {
		return r, fmt.Errorf("start %s in %s: %w", req.Job, pod, err)
	}
	return r, nil
}

// Signal implements agentapi.Client.
func (p Pods) Signal(ctx context.Context, pod types.NamespacedName, job string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	r, err := p.client(pod).Signal(ctx, job, sig)
	if err != nil {
		return r, fmt.Errorf("signal %s in %s: %w", job, pod, err)
	}
	return r, nil
}

// Events implements agentapi.Client.
func (p Pods) Events(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	if err := p.client(pod).Events(ctx, handle); err != nil {
		return fmt.Errorf("events of %s: %w", pod, err)
	}
	return nil
}

// Delivered implements agentapi.Client.
func (p Pods) Delivered(ctx context.Context, pod types.NamespacedName, job string) error {
	if err := p.client(pod).Delivered(ctx, job); err != nil {
		return fmt.Errorf("delivered %s in %s: %w", job, pod, err)
	}
	return nil
}

// Hangup implements agentapi.Client.
func (p Pods) Hangup(ctx context.Context, pod types.NamespacedName, job, session string) error {
	if err := p.client(pod).Hangup(ctx, job, session); err != nil {
		return fmt.Errorf("hangup %s in %s: %w", job, pod, err)
	}
	return nil
}

// Follow implements agentapi.Client.
func (p Pods) Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error) {
	n, err := p.client(pod).Follow(ctx, job, offset, w)
	if err != nil {
		return n, fmt.Errorf("follow %s in %s: %w", job, pod, err)
	}
	return n, nil
}

// FollowText implements agentapi.Client, through the text stream the
// agent's client makes, as over an exec.
func (p Pods) FollowText(ctx context.Context, pod types.NamespacedName, job string, mode agentapi.TextMode, w io.Writer) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(p.client(pod).FollowText(ctx, job, mode, pw)) }()
	defer pr.Close()
	if err := agentapi.ReadText(pr, mode, w); err != nil {
		return fmt.Errorf("follow text of %s in %s: %w", job, pod, err)
	}
	return nil
}

// PutFiles implements agentapi.Client.
func (p Pods) PutFiles(ctx context.Context, pod types.NamespacedName, job string, tar io.Reader) error {
	if err := p.client(pod).PutFiles(ctx, job, tar); err != nil {
		return fmt.Errorf("put files of %s in %s: %w", job, pod, err)
	}
	return nil
}

// GetFiles implements agentapi.Client.
func (p Pods) GetFiles(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) error {
	if err := p.client(pod).GetFiles(ctx, job, offset, w); err != nil {
		return fmt.Errorf("get files of %s in %s: %w", job, pod, err)
	}
	return nil
}

// Attach attaches to the console of job on pod (Client.Attach), as the
// attach subcommand does in a worker pod.
func (p Pods) Attach(ctx context.Context, pod types.NamespacedName, job string, in io.Reader, out io.Writer, sizes <-chan WindowSize) (int, error) {
	code, err := p.client(pod).Attach(ctx, job, in, out, sizes)
	if err != nil {
		return code, fmt.Errorf("attach %s in %s: %w", job, pod, err)
	}
	return code, nil
}
