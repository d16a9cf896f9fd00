package bot

import "sync"

// chatBook keeps the chats the bot has seen, by Bot API id. A chat is
// reached by its MTProto peer, whose access hash (a user's, a
// supergroup's) only something seen from there gives: a message, a button
// press, or a job's notes read back after a restart. A pool's approvers'
// chat is named by id alone, and found here.
type chatBook struct {
	mu   sync.Mutex
	byID map[int64]Chat
}

// learn keeps chat, without its topic.
func (c *chatBook) learn(chat Chat) {
	if chat.ID == 0 || chat.Kind == "" {
		return
	}
	chat.Topic = 0
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[int64]Chat{}
	}
	c.byID[chat.ID] = chat
}

// channelIDs start here: a supergroup's or channel's Bot API id is
// -1000000000000 minus its MTProto id.
const channelIDs = -1000000000000

// get is the chat of Bot API id id: one seen, or a basic group, which
// needs no access hash; false when it cannot be reached yet.
func (c *chatBook) get(id int64) (Chat, bool) {
	c.mu.Lock()
	chat, ok := c.byID[id]
	c.mu.Unlock()
	switch {
	case ok:
		return chat, true
	case id < 0 && id > channelIDs:
		return Chat{ID: id, Kind: PeerChat, PeerID: -id}, true
	}
	return Chat{}, false
}
