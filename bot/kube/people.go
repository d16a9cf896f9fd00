package kube

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/streamclient"
)

// People hands out the chat admins' ways to the API server: the bot's own
// config impersonating each admin's identity (identity.Impersonation), and
// a client of it, made once per admin and reused.
//
// Every client shares the bot's connections: client-go keeps one
// transport per TLS configuration (its transport cache), and impersonation
// only adds headers on top of it, so an admin costs no connection of its
// own. The clients share the bot's REST mapper too: an impersonated client
// needs no discovery of its own, and one the API server refused to let the
// bot become could not discover the API at all, and would fail with a
// mapping error rather than the API server's refusal.
type People struct {
	config  *rest.Config
	options client.Options

	mu     sync.Mutex
	byUser map[int64]*admin
}

type admin struct {
	id     identity.Identity
	config *rest.Config
	client client.Client
	stream *streamclient.Client // made at its first read (Stream)
}

// NewPeople returns the People of the bot that reaches the API server
// with config, its clients made with options (the bot's scheme and REST
// mapper).
func NewPeople(config *rest.Config, options client.Options) *People {
	options.HTTPClient = nil // each admin needs the impersonation of its own http.Client
	return &People{config: rest.CopyConfig(config), options: options, byUser: map[int64]*admin{}}
}

// Config is the bot's config impersonating id, for a client of the API's
// own (internal/streamclient): the caller may change its copy.
func (p *People) Config(id identity.Identity) (*rest.Config, error) {
	a, err := p.get(id)
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(a.config), nil
}

// Client is a client that acts as id.
func (p *People) Client(id identity.Identity) (client.Client, error) {
	a, err := p.get(id)
	if err != nil {
		return nil, err
	}
	return a.client, nil
}

// Stream is bot, the bot's own client of the stream API, acting as id
// through myshelljobs (streamclient.Client.As): the stream API serves them
// their own jobs alone.
func (p *People) Stream(id identity.Identity, bot *streamclient.Client) (*streamclient.Client, error) {
	a, err := p.get(id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.stream == nil {
		if a.stream, err = bot.As(id.Impersonation()); err != nil {
			return nil, err
		}
	}
	return a.stream, nil
}

func (p *People) get(id identity.Identity) (*admin, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byUser[id.TelegramUser]; ok && sameIdentity(a.id, id) {
		return a, nil
	}
	cfg := rest.CopyConfig(p.config)
	cfg.Impersonate = id.Impersonation()
	c, err := client.New(cfg, p.options)
	if err != nil {
		return nil, fmt.Errorf("a client as %s: %w", id.User, err)
	}
	a := &admin{id: id, config: cfg, client: c}
	p.byUser[id.TelegramUser] = a
	return a, nil
}

func sameIdentity(a, b identity.Identity) bool {
	return a.TelegramUser == b.TelegramUser && a.User == b.User && slices.Equal(a.Groups, b.Groups)
}
