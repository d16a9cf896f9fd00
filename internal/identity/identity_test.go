package identity_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"shelljob.dev/shelljob/internal/identity"
)

const mapping = `
identities:
- telegramUser: 111
  user: alice
  groups: [dev]
  pool: dev
- telegramUser: 222
  user: bob
  groups: [dev, prod, shelljob:telegram]
- telegramUser: 333
  user: shelljob:telegram:333
chats:
- chat: -1001
  pool: dev
- chat: 111
  pool: alice
`

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in   string
		want *identity.Mapping
		err  string
	}{
		"the chart's rendering": {
			in: mapping,
			want: &identity.Mapping{
				Identities: []identity.Identity{
					{TelegramUser: 111, User: "alice", Groups: []string{"dev"}, Pool: "dev"},
					{TelegramUser: 222, User: "bob", Groups: []string{"dev", "prod", "shelljob:telegram"}},
					{TelegramUser: 333, User: "shelljob:telegram:333"},
				},
				Chats: []identity.Chat{{Chat: -1001, Pool: "dev"}, {Chat: 111, Pool: "alice"}},
			},
		},
		"JSON":        {in: `{"identities":[{"telegramUser":1234567890123,"user":"a"}]}`, want: &identity.Mapping{Identities: []identity.Identity{{TelegramUser: 1234567890123, User: "a"}}}},
		"nothing":     {in: ``, want: &identity.Mapping{}},
		"empty lists": {in: "identities: []\nchats: []\n", want: &identity.Mapping{Identities: []identity.Identity{}, Chats: []identity.Chat{}}},
		"an unknown field": {
			in: "identities:\n- telegramUser: 1\n  user: a\n  group: dev\n", err: `unknown field "group"`},
		"a Telegram id that is not a whole number": {
			in: "identities:\n- telegramUser: 1.5\n  user: a\n", err: "telegramUser"},
		"no Telegram id": {in: "identities:\n- user: a\n", err: "identities[0]: telegramUser is missing"},
		"a Telegram user twice": {
			in: "identities:\n- telegramUser: 1\n  user: a\n- telegramUser: 1\n  user: b\n", err: "identities[1]: telegram user 1 is listed twice"},
		"no user":       {in: "identities:\n- telegramUser: 1\n", err: "identities[0]: user is missing"},
		"a system user": {in: "identities:\n- telegramUser: 1\n  user: system:admin\n", err: `user "system:admin": a chat admin may not be a system: user`},
		"a ServiceAccount": {
			in: "identities:\n- telegramUser: 1\n  user: system:serviceaccount:kube-system:default\n", err: "may not be a system: user"},
		"another admin's default": {
			in: "identities:\n- telegramUser: 1\n  user: shelljob:telegram:2\n", err: `user "shelljob:telegram:2" is another Telegram user's default identity`},
		"system:masters": {
			in: "identities:\n- telegramUser: 1\n  user: a\n  groups: [system:masters]\n", err: `group "system:masters": a chat admin may not be in a system: group`},
		"an empty group":   {in: "identities:\n- telegramUser: 1\n  user: a\n  groups: ['']\n", err: `group ""`},
		"a pool not named": {in: "identities:\n- telegramUser: 1\n  user: a\n  pool: Dev_1\n", err: `identities[0]: pool "Dev_1"`},
		"a chat with no pool": {
			in: "chats:\n- chat: -1\n", err: "chats[0]: pool is missing"},
		"a chat twice": {in: "chats:\n- chat: -1\n  pool: a\n- chat: -1\n  pool: b\n", err: "chats[1]: chat -1 is listed twice"},
		"no chat":      {in: "chats:\n- pool: a\n", err: "chats[0]: chat is missing"},
		"every error at once": {
			in: "identities:\n- user: system:x\n", err: "telegramUser is missing\nidentities[0]: user \"system:x\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := identity.Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOf(t *testing.T) {
	m, err := identity.Parse([]byte(mapping))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		m    *identity.Mapping
		id   int64
		want identity.Identity
	}{
		"mapped, the group added": {m: m, id: 111,
			want: identity.Identity{TelegramUser: 111, User: "alice", Groups: []string{"dev", "shelljob:telegram"}, Pool: "dev"}},
		"mapped, the group listed once": {m: m, id: 222,
			want: identity.Identity{TelegramUser: 222, User: "bob", Groups: []string{"dev", "prod", "shelljob:telegram"}}},
		"mapped to the default user": {m: m, id: 333,
			want: identity.Identity{TelegramUser: 333, User: "shelljob:telegram:333", Groups: []string{"shelljob:telegram"}}},
		"not listed": {m: m, id: 444,
			want: identity.Identity{TelegramUser: 444, User: "shelljob:telegram:444", Groups: []string{"shelljob:telegram"}}},
		"a negative id": {m: m, id: -7,
			want: identity.Identity{TelegramUser: -7, User: "shelljob:telegram:-7", Groups: []string{"shelljob:telegram"}}},
		"no mapping at all": {m: nil, id: 111,
			want: identity.Identity{TelegramUser: 111, User: "shelljob:telegram:111", Groups: []string{"shelljob:telegram"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.m.Of(tc.id)); diff != "" {
				t.Errorf("Of(%d) (-want +got):\n%s", tc.id, diff)
			}
		})
	}
	// Of hands out copies: a caller's change stays its own.
	a := m.Of(111)
	a.Groups[0] = "prod"
	if got := m.Of(111).Groups[0]; got != "dev" {
		t.Errorf("a change to Of's groups reached the mapping: %q", got)
	}
}

func TestPoolOf(t *testing.T) {
	m, err := identity.Parse([]byte(mapping))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m    *identity.Mapping
		chat int64
		pool string
		ok   bool
	}{
		{m, -1001, "dev", true},
		{m, 111, "alice", true},
		{m, -1002, "", false},
		{nil, -1001, "", false},
	} {
		if pool, ok := tc.m.PoolOf(tc.chat); pool != tc.pool || ok != tc.ok {
			t.Errorf("PoolOf(%d) = %q, %v; want %q, %v", tc.chat, pool, ok, tc.pool, tc.ok)
		}
	}
}

func TestImpersonation(t *testing.T) {
	m, err := identity.Parse([]byte(mapping))
	if err != nil {
		t.Fatal(err)
	}
	want := rest.ImpersonationConfig{
		UserName: "alice",
		Groups:   []string{"dev", "shelljob:telegram"},
		Extra:    map[string][]string{"shelljob.dev/telegram-user": {"111"}},
	}
	if diff := cmp.Diff(want, m.Of(111).Impersonation()); diff != "" {
		t.Errorf("Impersonation (-want +got):\n%s", diff)
	}
}
