package identity

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

const (
	// Group is the Kubernetes group of every chat admin's identity.
	Group = "shelljob:telegram"
	// DefaultUserPrefix, followed by the Telegram user id, is the user of
	// an admin the mapping does not list.
	DefaultUserPrefix = "shelljob:telegram:"
	// ExtraTelegramUser is the user extra that carries an identity's
	// Telegram user id, as the API server presents it to authorization and
	// admission: impersonation lower-cases extra keys, so it is lower-case.
	ExtraTelegramUser = "shelljob.dev/telegram-user"
	// Key is the key of the mapping in the bot's ConfigMap.
	Key = "identities.yaml"
)

// Identity is who a chat admin is to Kubernetes.
type Identity struct {
	// TelegramUser is the admin's Telegram user id.
	TelegramUser int64 `json:"telegramUser"`
	// User is the Kubernetes user name the bot impersonates for them.
	User string `json:"user"`
	// Groups are their Kubernetes groups, Group among them.
	Groups []string `json:"groups,omitempty"`
	// Pool is the pool of their private chat with the bot, "" for the
	// bot's own (-pool).
	Pool string `json:"pool,omitempty"`
}

// Chat maps a Telegram chat to the pool its commands run on.
type Chat struct {
	// Chat is a Bot API chat id: negative for groups.
	Chat int64 `json:"chat"`
	// Pool is the ShellPool of its commands.
	Pool string `json:"pool"`
}

// Mapping is the chart's mapping of admins and chats.
type Mapping struct {
	Identities []Identity `json:"identities,omitempty"`
	Chats      []Chat     `json:"chats,omitempty"`
}

// Parse reads a Mapping, in YAML or JSON, refusing unknown fields, and
// checks it: each Telegram user and each chat listed once, users and
// groups that are not the system's, pools that are names.
func Parse(data []byte) (*Mapping, error) {
	var m Mapping
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	var errs []error
	users := ids{field: "telegramUser", what: "telegram user"}
	for i, id := range m.Identities {
		at := fmt.Sprintf("identities[%d]", i)
		errs = append(errs, users.check(at, id.TelegramUser)...)
		errs = append(errs, checkUser(at, id)...)
		for _, g := range id.Groups {
			if g == "" || strings.HasPrefix(g, "system:") {
				errs = append(errs, fmt.Errorf("%s: group %q: a chat admin may not be in a system: group or an empty one", at, g))
			}
		}
		errs = append(errs, checkPool(at, id.Pool, false)...)
	}
	chats := ids{field: "chat", what: "chat"}
	for i, c := range m.Chats {
		at := fmt.Sprintf("chats[%d]", i)
		errs = append(errs, chats.check(at, c.Chat)...)
		errs = append(errs, checkPool(at, c.Pool, true)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

// ids are the Telegram ids of one list, each to be set and listed once.
type ids struct {
	field, what string
	seen        map[int64]bool
}

func (s *ids) check(at string, id int64) []error {
	if s.seen == nil {
		s.seen = map[int64]bool{}
	}
	switch {
	case id == 0:
		return []error{fmt.Errorf("%s: %s is missing", at, s.field)}
	case s.seen[id]:
		return []error{fmt.Errorf("%s: %s %d is listed twice", at, s.what, id)}
	}
	s.seen[id] = true
	return nil
}

func checkUser(at string, id Identity) []error {
	switch u := id.User; {
	case u == "":
		return []error{fmt.Errorf("%s: user is missing", at)}
	case strings.HasPrefix(u, "system:"):
		return []error{fmt.Errorf("%s: user %q: a chat admin may not be a system: user", at, u)}
	case strings.HasPrefix(u, DefaultUserPrefix) && u != Default(id.TelegramUser).User:
		return []error{fmt.Errorf("%s: user %q is another Telegram user's default identity", at, u)}
	}
	return nil
}

func checkPool(at, pool string, required bool) []error {
	if pool == "" {
		if required {
			return []error{fmt.Errorf("%s: pool is missing", at)}
		}
		return nil
	}
	if msgs := validation.IsDNS1123Label(pool); len(msgs) > 0 {
		return []error{fmt.Errorf("%s: pool %q: %s", at, pool, strings.Join(msgs, "; "))}
	}
	return nil
}

// Default is the identity of an admin the mapping does not list: user
// shelljob:telegram:<id>, in Group.
func Default(telegramUser int64) Identity {
	return Identity{TelegramUser: telegramUser, User: DefaultUserPrefix + strconv.FormatInt(telegramUser, 10), Groups: []string{Group}}
}

// Of is the identity of a Telegram user: the one the mapping lists, else
// Default. Its groups hold Group, once.
func (m *Mapping) Of(telegramUser int64) Identity {
	if m != nil {
		for _, id := range m.Identities {
			if id.TelegramUser == telegramUser {
				id.Groups = slices.Clone(id.Groups)
				if !slices.Contains(id.Groups, Group) {
					id.Groups = append(id.Groups, Group)
				}
				return id
			}
		}
	}
	return Default(telegramUser)
}

// PoolOf is the pool the mapping gives a chat, false when it gives none.
func (m *Mapping) PoolOf(chat int64) (string, bool) {
	if m != nil {
		for _, c := range m.Chats {
			if c.Chat == chat {
				return c.Pool, true
			}
		}
	}
	return "", false
}

// Impersonation is the impersonation of the identity, for a rest.Config:
// its user, its groups and its Telegram user id as the user extra
// ExtraTelegramUser.
func (id Identity) Impersonation() rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: id.User,
		Groups:   slices.Clone(id.Groups),
		Extra:    map[string][]string{ExtraTelegramUser: {strconv.FormatInt(id.TelegramUser, 10)}},
	}
}
