package termchat

import (
	"fmt"

	"shelljob.dev/shelljob/internal/faketg"
)

// The chats of the fake's world (NewWorld) that the commands name.
const (
	groupTitle   = "ops"
	superTitle   = "ops-super"
	forumTitle   = "ops-forum"
	outsideTitle = "elsewhere"
	topicTitle   = "builds"
	malloryName  = "mallory"
)

// NewWorld adds the users and chats the terminal chat uses: an admin for
// each of admins (the first is you), a user @mallory who is not one, the
// basic group "ops", the supergroup "ops-super", the forum "ops-forum"
// and the group "elsewhere" that the bot is not in (for guest queries).
func NewWorld(s *faketg.Server, admins []int64) {
	for i, id := range admins {
		s.NewUser(faketg.UserOptions{ID: id, FirstName: fmt.Sprintf("Admin%d", i+1), Username: fmt.Sprintf("admin%d", i+1), Admin: true})
	}
	s.NewUser(faketg.UserOptions{FirstName: "Mallory", Username: malloryName})
	s.NewGroup(groupTitle)
	s.NewSupergroup(superTitle)
	s.NewForum(forumTitle)
	s.NewChat(faketg.Group, faketg.ChatOptions{Title: outsideTitle, NoBot: true})
}
