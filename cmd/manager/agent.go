package main

import (
	"k8s.io/client-go/rest"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
)

// newAgentClient reaches the workers' agents by pod exec.
func newAgentClient(cfg *rest.Config, warm bool) (agentapi.Client, error) {
	return agentclient.New(cfg, agentclient.Options{Container: agentapi.WorkerContainer, Warm: warm})
}
