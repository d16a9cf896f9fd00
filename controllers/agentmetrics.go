package controllers

import (
	"context"
	"errors"
	"io"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/metrics"
)

// countingAgent is an agent client that counts its failed calls by the
// agent's subcommand (metrics.AgentExecErrors). A call whose context was
// canceled is not counted: the operator cut it, as it does the events
// stream of a worker that went away. One that ran out of time is.
type countingAgent struct {
	agentapi.Client
}

var _ agentapi.Client = countingAgent{}

// count records err, if any, as a failed exec of subcommand.
func count(ctx context.Context, subcommand string, err error) {
	if err != nil && !errors.Is(ctx.Err(), context.Canceled) {
		metrics.ExecFailed(subcommand)
	}
}

func (a countingAgent) Start(ctx context.Context, pod types.NamespacedName, req agentapi.StartRequest) (agentapi.StartResponse, error) {
	resp, err := a.Client.Start(ctx, pod, req)
	count(ctx, agentapi.CmdStart, err)
	return resp, err
}

func (a countingAgent) Signal(ctx context.Context, pod types.NamespacedName, job string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	resp, err := a.Client.Signal(ctx, pod, job, sig)
	count(ctx, agentapi.CmdSignal, err)
	return resp, err
}

func (a countingAgent) Events(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	err := a.Client.Events(ctx, pod, handle)
	count(ctx, agentapi.CmdEvents, err)
	return err
}

func (a countingAgent) Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error) {
	n, err := a.Client.Follow(ctx, pod, job, offset, w)
	count(ctx, agentapi.CmdFollow, err)
	return n, err
}

func (a countingAgent) PutFiles(ctx context.Context, pod types.NamespacedName, job string, tar io.Reader) error {
	err := a.Client.PutFiles(ctx, pod, job, tar)
	count(ctx, agentapi.CmdPutFiles, err)
	return err
}

func (a countingAgent) GetFiles(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) error {
	err := a.Client.GetFiles(ctx, pod, job, offset, w)
	count(ctx, agentapi.CmdGetFiles, err)
	return err
}

func (a countingAgent) Delivered(ctx context.Context, pod types.NamespacedName, job string) error {
	err := a.Client.Delivered(ctx, pod, job)
	count(ctx, agentapi.CmdDelivered, err)
	return err
}
