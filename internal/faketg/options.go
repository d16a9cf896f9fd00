package faketg

import (
	"crypto/rsa"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/gotd/td/crypto"
)

// Options configure a Server.
type Options struct {
	// Addr is the TCP address to listen on.
	// Defaults to "127.0.0.1:0" (a free port on loopback).
	Addr string
	// Advertise is the "host:port" the server reports as its DC address in
	// help.getConfig and in DCList. A bot in a kind pod dials this, so set
	// it when Addr listens on 0.0.0.0 or behind a port mapping.
	// The host may be a name ("faketg.ns.svc:8443"): gotd dials DC
	// addresses with net.Dialer, which resolves it, both from the bot's
	// own DC list and from this one after a reconnect. Port 0 stands for
	// the listener's port. Defaults to the listener's address.
	Advertise string
	// DC is the ID of the only DC. Defaults to 2, gotd's default DC.
	DC int
	// PrivateKey is the server's RSA key. Defaults to a fresh 2048-bit key;
	// pass a stored one (LoadPrivateKey) to keep the public key stable
	// across restarts of the fake.
	PrivateKey *rsa.PrivateKey
	// BotToken is the only token auth.importBotAuthorization accepts; any
	// other gets 401 ACCESS_TOKEN_INVALID. Defaults to DefaultBotToken.
	BotToken string
	// Bot is the bot's account. Defaults: ID DefaultBotID, first name
	// "Shelljob", username "shelljob_bot".
	Bot BotOptions
	// GroupDrafts makes messages.setTyping with a text draft succeed in
	// groups, supergroups and forums. Defaults to false: like Telegram,
	// the fake refuses drafts outside private chats (see ErrDraftRefused).
	GroupDrafts bool
	// ShortUpdates delivers a user's plain text in a private chat as
	// updateShortMessage (no users attached), as Telegram often does; the
	// bot's updates manager converts it, or fetches the sender with
	// updates.getDifference. Defaults to false: a full Updates with users.
	ShortUpdates bool
	// ReadTimeout closes a connection that sends nothing for this long.
	// Defaults to 10 minutes (tgtest's own 30 s default is shorter than
	// gotd's one-minute ping interval).
	ReadTimeout time.Duration
	// Logger logs the server (connections, unknown methods). Defaults to
	// zap.NewNop.
	Logger *zap.Logger
	// Random is the source of randomness for keys and the MTProto cipher.
	// Defaults to crypto.DefaultRand().
	Random io.Reader
	// FileBytes caps the bytes of files the server keeps in memory: past
	// it, the oldest files' contents go (their messages stay), and reading
	// one fails with FILE_REFERENCE_EXPIRED. A long-lived fake that has
	// been sent many large files keeps a flat memory. Defaults to
	// DefaultFileBytes.
	FileBytes int64
}

// BotOptions describe the bot's account.
type BotOptions struct {
	// ID of the bot user. Defaults to DefaultBotID.
	ID int64
	// FirstName defaults to "Shelljob".
	FirstName string
	// Username is the primary username, without "@". Defaults to
	// "shelljob_bot". Set NoUsername for a bot with aliases only.
	Username string
	// NoUsername leaves the bot without a primary username.
	NoUsername bool
	// Aliases are further usernames (collectible usernames); the bot sees
	// them in users.getUsers as user.usernames.
	Aliases []Alias
}

// Alias is one of the bot's extra usernames.
type Alias struct {
	Username string
	// Active aliases are shown in the profile and resolve to the bot.
	Active bool
}

// Defaults of Options.
const (
	DefaultBotID     int64 = 7000000001
	DefaultBotToken        = "7000000001:TEST-TOKEN"
	DefaultFileBytes       = 256 << 20
)

func (o *Options) setDefaults() {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.DC == 0 {
		o.DC = 2
	}
	if o.FileBytes <= 0 {
		o.FileBytes = DefaultFileBytes
	}
	if o.BotToken == "" {
		o.BotToken = DefaultBotToken
	}
	if o.Bot.ID == 0 {
		o.Bot.ID = DefaultBotID
	}
	if o.Bot.FirstName == "" {
		o.Bot.FirstName = "Shelljob"
	}
	if o.Bot.Username == "" && !o.Bot.NoUsername {
		o.Bot.Username = "shelljob_bot"
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Random == nil {
		o.Random = crypto.DefaultRand()
	}
}
