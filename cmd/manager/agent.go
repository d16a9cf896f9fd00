package main

import (
	"k8s.io/client-go/rest"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
)

// newAgentClient reaches the workers' agents by pod exec. The leader's
// controllers keep a warm control channel to each worker (warm); the
// stream API's follows go over it, and, on a replica that does not lead,
// over a reader's channel per worker that the follows open and share, as
// the bot's did: no exec per follow in steady state.
func newAgentClient(cfg *rest.Config, warm bool) (agentapi.Client, error) {
	return agentclient.New(cfg, agentclient.Options{Container: agentapi.WorkerContainer, Warm: warm, ShareFollows: true})
}
