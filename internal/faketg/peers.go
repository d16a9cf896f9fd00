package faketg

import (
	"fmt"
	"sync"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// peerService is the fake's directory: its users and chats, and the bot's
// profile. Users and chats are never removed, and their exported fields
// never change, so a *User or *Chat found here may be read without its
// lock.
type peerService struct {
	s *Server

	mu       sync.Mutex
	bot      BotOptions
	users    map[int64]*User
	userList []*User
	chats    map[chatKey]*Chat
	chatList []*Chat

	nextUserID int64
	nextChatID int64
}

type chatKey struct {
	kind ChatKind
	id   int64
}

func newPeerService(s *Server, bot BotOptions) *peerService {
	return &peerService{
		s: s, bot: bot,
		users:      map[int64]*User{},
		chats:      map[chatKey]*Chat{},
		nextUserID: 1000001,
		nextChatID: 2000001,
	}
}

func (p *peerService) register(d *tgtest.Dispatcher) {
	handle(d, tg.UsersGetUsersRequestTypeID, p.getUsers)
}

// NewUser adds a user. It panics on an ID already taken, a test bug.
func (s *Server) NewUser(opts UserOptions) *User {
	p := s.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if opts.ID == 0 {
		for p.users[p.nextUserID] != nil {
			p.nextUserID++
		}
		opts.ID = p.nextUserID
		p.nextUserID++
	}
	if _, ok := p.users[opts.ID]; ok || opts.ID == s.opts.Bot.ID {
		panic(fmt.Sprintf("faketg: user ID %d taken", opts.ID))
	}
	if opts.FirstName == "" {
		opts.FirstName = fmt.Sprintf("User%d", opts.ID)
	}
	u := &User{
		s: s, ID: opts.ID, AccessHash: opts.ID*7 + 13,
		FirstName: opts.FirstName, Username: opts.Username, Admin: opts.Admin,
	}
	u.private = &Chat{s: s, Kind: Private, ID: u.ID, User: u, BotMember: true, msgs: map[int]*Message{}}
	p.users[u.ID] = u
	p.userList = append(p.userList, u)
	p.chats[keyOf(Private, u.ID)] = u.private
	p.chatList = append(p.chatList, u.private)
	return u
}

// Admins are the IDs of the users labelled Admin.
func (s *Server) Admins() []int64 {
	var ids []int64
	for _, u := range s.Users() {
		if u.Admin {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

// User finds a user by ID.
func (s *Server) User(id int64) (*User, bool) {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	u, ok := s.peers.users[id]
	return u, ok
}

// Users are the fake's users in the order they were added.
func (s *Server) Users() []*User {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return append([]*User(nil), s.peers.userList...)
}

// Chats are the fake's chats in the order they were added, each user's
// private chat included.
func (s *Server) Chats() []*Chat {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return append([]*Chat(nil), s.peers.chatList...)
}

// Chat finds a chat by its Bot API ID (Chat.BotAPIID), which tells the
// kinds apart.
func (s *Server) Chat(botAPIID int64) (*Chat, bool) {
	var k chatKey
	switch {
	case botAPIID > 0:
		k = keyOf(Private, botAPIID)
	case botAPIID < -1000000000000:
		k = keyOf(Supergroup, -1000000000000-botAPIID)
	default:
		k = keyOf(Group, -botAPIID)
	}
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	c, ok := s.peers.chats[k]
	return c, ok
}

// ChatOptions describe a new group, supergroup or forum.
type ChatOptions struct {
	// Title defaults to "Group <ID>".
	Title string
	// NoBot makes a chat the bot is not a member of, for guest queries:
	// messages there are not delivered to the bot, and it cannot send.
	NoBot bool
}

// NewChat adds a group, supergroup or forum. kind must not be Private
// (use User.Private).
func (s *Server) NewChat(kind ChatKind, opts ChatOptions) *Chat {
	if kind == Private {
		panic("faketg: NewChat(Private): use User.Private")
	}
	p := s.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextChatID
	p.nextChatID++
	if opts.Title == "" {
		opts.Title = fmt.Sprintf("Group %d", id)
	}
	c := &Chat{
		s: s, Kind: kind, ID: id, Title: opts.Title, BotMember: !opts.NoBot,
		msgs: map[int]*Message{},
	}
	if c.Channel() {
		c.AccessHash = id*11 + 3
	}
	if kind == Forum {
		// The General topic.
		c.topics = append(c.topics, &Topic{Chat: c, ID: GeneralTopicID, Title: "General"})
		c.nextMsgID = GeneralTopicID
	}
	p.chats[keyOf(kind, id)] = c
	p.chatList = append(p.chatList, c)
	return c
}

// NewGroup adds a basic group with the bot in it.
func (s *Server) NewGroup(title string) *Chat { return s.NewChat(Group, ChatOptions{Title: title}) }

// NewSupergroup adds a supergroup with the bot in it.
func (s *Server) NewSupergroup(title string) *Chat {
	return s.NewChat(Supergroup, ChatOptions{Title: title})
}

// NewForum adds a forum (supergroup with topics) with the bot in it.
func (s *Server) NewForum(title string) *Chat { return s.NewChat(Forum, ChatOptions{Title: title}) }

// SetBotProfile changes the bot's names, as BotFather or Fragment would:
// users.getUsers returns them from then on.
func (s *Server) SetBotProfile(username string, aliases ...Alias) {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	s.peers.bot.Username = username
	s.peers.bot.NoUsername = username == ""
	s.peers.bot.Aliases = append([]Alias(nil), aliases...)
}

// BotUsername is the bot's primary username.
func (s *Server) BotUsername() string {
	s.peers.mu.Lock()
	defer s.peers.mu.Unlock()
	return s.peers.bot.Username
}

// botUser is the bot as users.getUsers returns it to itself.
func (p *peerService) botUser() *tg.User {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.botUserLocked()
}

func (p *peerService) botUserLocked() *tg.User {
	b := p.bot
	u := &tg.User{ID: b.ID}
	u.SetSelf(true)
	u.SetBot(true)
	u.SetAccessHash(b.ID ^ 0x5eed)
	u.SetFirstName(b.FirstName)
	if b.Username != "" && !b.NoUsername {
		u.SetUsername(b.Username)
	}
	if len(b.Aliases) > 0 {
		var names []tg.Username
		if b.Username != "" && !b.NoUsername {
			names = append(names, tg.Username{Editable: true, Active: true, Username: b.Username})
		}
		for _, a := range b.Aliases {
			names = append(names, tg.Username{Active: a.Active, Username: a.Username})
		}
		u.SetUsernames(names)
	}
	u.SetBotInfoVersion(1)
	return u
}

// tgUsers are every user as the bot sees them, the bot first (without
// its self flag, as other users' updates carry it).
func (p *peerService) tgUsers() []tg.UserClass {
	p.mu.Lock()
	defer p.mu.Unlock()
	bot := p.botUserLocked()
	bot.Self = false
	out := make([]tg.UserClass, 0, len(p.userList)+1)
	out = append(out, bot)
	for _, u := range p.userList {
		out = append(out, u.tg())
	}
	return out
}

// tgChats are every group, supergroup and forum as the bot sees them.
func (p *peerService) tgChats() []tg.ChatClass {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]tg.ChatClass, 0, len(p.chatList))
	for _, c := range p.chatList {
		if c.Kind != Private {
			out = append(out, c.tg())
		}
	}
	return out
}

// wrap wraps updates with every user and chat.
func (p *peerService) wrap(u ...tg.UpdateClass) *tg.Updates {
	return &tg.Updates{Updates: u, Users: p.tgUsers(), Chats: p.tgChats(), Date: int(time.Now().Unix())}
}

func keyOf(kind ChatKind, id int64) chatKey {
	if kind == Forum {
		kind = Supergroup
	}
	return chatKey{kind: kind, id: id}
}

var errPeerInvalid = tgerr.New(400, "PEER_ID_INVALID")

// resolve finds the chat of a peer of the bot's request, checking access
// hashes as Telegram does.
func (p *peerService) resolve(in tg.InputPeerClass) (*Chat, *tgerr.Error) {
	switch in := in.(type) {
	case *tg.InputPeerUser:
		p.mu.Lock()
		u, ok := p.users[in.UserID]
		p.mu.Unlock()
		if !ok || u.AccessHash != in.AccessHash {
			return nil, errPeerInvalid
		}
		return u.private, nil
	case *tg.InputPeerChat:
		p.mu.Lock()
		c, ok := p.chats[keyOf(Group, in.ChatID)]
		p.mu.Unlock()
		if !ok {
			return nil, errPeerInvalid
		}
		if !c.BotMember {
			return c, tgerr.New(400, "CHAT_WRITE_FORBIDDEN")
		}
		return c, nil
	case *tg.InputPeerChannel:
		return p.channel(&tg.InputChannel{ChannelID: in.ChannelID, AccessHash: in.AccessHash})
	default:
		return nil, errPeerInvalid
	}
}

// channel finds the supergroup or forum of a channel of the bot's request.
func (p *peerService) channel(in tg.InputChannelClass) (*Chat, *tgerr.Error) {
	ch, ok := in.(*tg.InputChannel)
	if !ok {
		return nil, tgerr.New(400, "CHANNEL_INVALID")
	}
	p.mu.Lock()
	c, ok := p.chats[keyOf(Supergroup, ch.ChannelID)]
	p.mu.Unlock()
	if !ok || c.AccessHash != ch.AccessHash {
		return nil, tgerr.New(400, "CHANNEL_INVALID")
	}
	if !c.BotMember {
		return c, tgerr.New(400, "CHANNEL_PRIVATE")
	}
	return c, nil
}

func (p *peerService) getUsers(srv *tgtest.Server, req *tgtest.Request, r *tg.UsersGetUsersRequest) error {
	p.s.journal.call("users.getUsers", r)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]bin.Encoder, 0, len(r.ID))
	for _, in := range r.ID {
		switch in := in.(type) {
		case *tg.InputUserSelf:
			out = append(out, p.botUserLocked())
		case *tg.InputUser:
			if in.UserID == p.bot.ID {
				out = append(out, p.botUserLocked())
				continue
			}
			if u, ok := p.users[in.UserID]; ok && u.AccessHash == in.AccessHash {
				out = append(out, u.tg())
				continue
			}
			out = append(out, &tg.UserEmpty{ID: in.UserID})
		default:
			out = append(out, &tg.UserEmpty{})
		}
	}
	return srv.SendVector(req, out...)
}
