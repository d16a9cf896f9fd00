// Package faketg is a fake Telegram for testing the shelljob bot: one DC of
// gotd's tgtest MTProto server (real key exchange and encryption) on a TCP
// port, with the users, chats and messages of a small Telegram behind it.
// The bot under test runs unmodified: it is configured only with the DC
// address, the server's public key, any app ID/hash and the bot token.
//
// # Starting
//
//	s := faketg.NewTest(t, faketg.Options{})        // free loopback port, closed at the end
//	// or: s, _ := faketg.New(opts); s.Start(ctx); defer s.Close()
//
// Point the bot at it with Server.Addr ("host:port", DC Server.DC, 2 by
// default) and Server.PublicKeyPEM (PKCS#1 PEM, read by gotd's
// crypto.ParseRSAPublicKeys), or in process with Server.ClientOptions
// (telegram.Options with PublicKeys, DC and DCList). The token is
// Server.BotToken (Options.BotToken, DefaultBotToken by default). Set
// Options.Advertise when the bot reaches the fake under another address
// (a kind pod): help.getConfig reports it as the DC's address, which gotd
// dials after a reconnect. It may be a host name (a Service's DNS name),
// as may the bot's own DC address: gotd resolves both with net.Dialer. The key is
// generated per Server unless Options.PrivateKey is given (LoadPrivateKey,
// PrivateKeyPEM) so that it stays the same across restarts of the fake.
// The fake keeps auth keys in memory only: after a restart of the fake,
// start the bot with a fresh session.
//
// Each new gotd client does a real key exchange, whose check of a
// 2048-bit safe prime takes about 0.1 s normally and several seconds under
// -race on a loaded 2-core machine: give bots in tests a generous
// telegram.Options.ExchangeTimeout and do not set a short DialTimeout
// (without PFS, gotd's DialTimeout bounds dial and key exchange together). A restarted bot that keeps
// its session skips the exchange.
//
// # The world
//
//	alice := s.NewUser(faketg.UserOptions{Username: "alice", Admin: true})
//	g := s.NewGroup("ops")             // basic group, the bot in it
//	sg := s.NewSupergroup("ops2")      // channel-based, own pts
//	f := s.NewForum("forum"); topic, _ := f.NewTopic(ctx, "builds")
//	guest := s.NewChat(faketg.Group, faketg.ChatOptions{NoBot: true})
//
// A user's private chat with the bot is User.Private. Message IDs follow
// Telegram: private chats and basic groups share the bot's sequence,
// supergroups and forums count their own. Peers in the bot's requests are
// checked with their access hashes, so a bot that lost them fails with
// PEER_ID_INVALID or CHANNEL_INVALID as on Telegram. The fake delivers every
// group message to the bot (as with privacy mode off).
//
// # Acting as users
//
//	m, err := alice.In(alice.Private()).Reply(id).Text(ctx, ".a ls")   // or alice.Send(ctx, chat, text)
//	alice.In(g).Forwarded(bob).Document("a.txt", "text/plain", data).Text(ctx, ".a cat a.txt")
//	alice.In(f).Topic(topic.ID).Photo(jpeg).Text(ctx, "caption")
//	ans, err := bob.Press(ctx, chat, msgID, []byte("shk:3"))            // waits for the toast
//	err = alice.StopDraft(ctx, *ev.Draft)                                // a draft's Stop
//	q, err := alice.Guest(ctx, guest, "@shelljob_bot .a ls", ref); q.Answer(ctx)
//
// Messages reach the bot as updateNewMessage (updateNewChannelMessage in
// supergroups) with the next pts, and guest queries as
// updateBotGuestChatQuery with the next qts, in tg.Updates with every user
// and chat (Options.ShortUpdates sends private text as updateShortMessage
// instead). Files users send are served by upload.getFile. Button presses
// (updateBotCallbackQuery) and Stop (updateUserTyping with
// sendMessageStopDraftAction) have no pts and are lost when the bot is not
// connected, as on Telegram.
//
// # Reading what the bot did
//
// Every call of the bot is an Event in Server.Log, with the server's
// receive time: Send, Edit, Draft, Typing, Delete, Upload, Toast, Commands,
// GuestResult, InlineEdit, and Call for the rest (getDifference, getFile…).
// Unknown marks a method the fake does not serve; it is logged as an error
// and answered with INPUT_METHOD_INVALID. Calls that failed keep their
// error in Event.Err. Chat.Messages and Chat.Message give the chats' current
// state (text after edits, buttons, Deleted), Server.GuestAnswer a guest
// answer, Server.BotCommands the menu. Wait without sleeping:
//
//	seq := s.Seq()
//	ev, err := s.WaitKind(ctx, seq, faketg.Edit, chat)
//	_, err = s.WaitFor(ctx, func(l faketg.Log) bool { return len(l.Of(faketg.Draft)) >= 3 })
//
// # Telegram's refusals and injected faults
//
// Like Telegram, the fake answers an edit that changes nothing with
// MESSAGE_NOT_MODIFIED, an edit of a deleted message with
// MESSAGE_ID_INVALID, an empty or over-long text with MESSAGE_EMPTY or
// MESSAGE_TOO_LONG, a second answer to a callback query with
// QUERY_ID_INVALID, and a text draft outside private chats with
// ErrDraftRefused (Chat.AllowDrafts and Options.GroupDrafts change that).
// An edit without reply_markup removes the message's buttons, as on
// Telegram. A guest answer's edit takes media only as a stored document or
// photo (messages.uploadMedia, peer inputPeerSelf or a chat of the bot),
// not a new upload (MEDIA_INVALID), and a caption of at most 1024 units
// (MEDIA_CAPTION_TOO_LONG), as sendMedia does. Tests add faults with FailNext / FailWhen (RPCError builds
// "FLOOD_WAIT_3" and friends), delete a message as a user with
// Chat.Delete, and change the bot's usernames with SetBotProfile.
// MethodID maps a TL method name to the TypeID FailNext takes.
//
// # Connections
//
// The bot's updates go to the newest connection of the auth key that
// logged in (auth.importBotAuthorization); connections made by auth
// transfer (telegram.Client.DC, auth.exportAuthorization and
// importAuthorization) are served but get no pushes. The fake's own
// methods are: auth.importBotAuthorization, auth.logOut,
// auth.exportAuthorization, auth.importAuthorization, help.getConfig,
// users.getUsers, updates.getState, updates.getDifference,
// updates.getChannelDifference, messages.sendMessage, editMessage,
// deleteMessages, sendMedia, setTyping, setBotCallbackAnswer,
// setBotGuestChatResult, editInlineBotMessage, uploadMedia, getMessages,
// channels.deleteMessages, channels.getMessages, bots.setBotCommands,
// upload.saveFilePart, saveBigFilePart and getFile.
//
// Package control serves all of this over HTTP and JSON (Server.Chat
// finds a chat by its Bot API ID, Server.File a file by Media.ID), for a
// fake that runs in another process or a pod.
//
// Package termchat is the terminal chat of cmd/faketg, on the control
// API; package echobot is a small bot that connects the way a production
// bot does, and cmd/faketg -echo-bot runs it to try the terminal chat.
//
// # Layout
//
// The Server is made of services, as gotd's tgtest/services are: each
// holds its own state under its own lock and registers its own methods.
// auth.go has the logins and the push connection, peers.go the users,
// chats and the bot's profile, updates.go the pts and qts boxes, their
// history and the pushes, messages.go and send.go the chats' messages
// and the bot's sends, edits, deletes, drafts and button answers,
// files.go the uploads and downloads, guest.go the guest queries and
// their answers, faults.go the injected faults, and log.go the journal
// of the bot's calls. dispatch.go runs before every method (auth,
// holds, faults), describe.go turns a request into its Event, and
// inject.go and actions.go act as users.
//
// # Updates state
//
// RPC results carry the next pts (updateShortSentMessage, Updates with
// the edit, messages.affectedMessages); updates.getState and
// updates.getDifference serve the real history, so a bot that persists
// its updates state gets what it missed while it was down; supergroups are
// served by updates.getChannelDifference. A bot whose saved state is ahead
// of the fake (the fake restarted) is moved to the fake's state.
// DisconnectBot cuts the bot's connection; Server.WaitConnected waits for
// a (new) bot connection whose updates manager asked for the state.
package faketg
