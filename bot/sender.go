package bot

import "context"

// Sender builds the bot's requests to Telegram, as gotd's message.Sender
// does: To and the setters are cheap and send nothing; the one call that
// takes a context sends.
//
//	b.tg.Reply(m).Text(ctx, text)
//	b.tg.To(chat).Reply(id).Silent().Buttons(rows).Text(ctx, text)
//	b.tg.To(chat).Buttons(rows).Edit(id).Text(ctx, text)
//	b.tg.Callback(queryID).Answer(ctx, toast)
type Sender struct{ tg Telegram }

// NewSender returns a Sender of requests to t.
func NewSender(t Telegram) Sender { return Sender{tg: t} }

// To starts a request in chat.
func (s Sender) To(chat Chat) *Builder { return &Builder{tg: s.tg, chat: chat} }

// Reply starts a reply to m. Shorthand for s.To(m.Chat).Reply(m.ID).
func (s Sender) Reply(m Message) *Builder { return s.To(m.Chat).Reply(m.ID) }

// Callback starts the answer to button press queryID.
func (s Sender) Callback(queryID int64) *CallbackAnswer {
	return &CallbackAnswer{tg: s.tg, id: queryID}
}

// GuestQuery starts the answer to guest chat query queryID.
func (s Sender) GuestQuery(queryID int64) *GuestQueryAnswer {
	return &GuestQueryAnswer{tg: s.tg, id: queryID}
}

// Guest starts an edit of guest answer m.
func (s Sender) Guest(m GuestMessage) *GuestEdit {
	return &GuestEdit{tg: s.tg, req: GuestEditRequest{Message: m}}
}

// Builder is a request in one chat: a message to send, or one to edit,
// delete or read.
type Builder struct {
	tg      Telegram
	chat    Chat
	reply   int
	silent  bool
	buttons [][]Button
}

// Reply makes the message a reply to message id (0: none).
func (b *Builder) Reply(id int) *Builder {
	b.reply = id
	return b
}

// Silent sends the message without a notification.
func (b *Builder) Silent() *Builder {
	b.silent = true
	return b
}

// Buttons puts inline buttons under the message, sent or edited; an edit
// without them removes the old ones.
func (b *Builder) Buttons(rows [][]Button) *Builder {
	b.buttons = rows
	return b
}

// Text sends text and returns the message's id.
func (b *Builder) Text(ctx context.Context, text string) (int, error) {
	return b.tg.Send(ctx, b.send(text, nil))
}

// File sends f, a photo or a document, and returns the message's id.
func (b *Builder) File(ctx context.Context, f File) (int, error) {
	return b.tg.Send(ctx, b.send("", &f))
}

func (b *Builder) send(text string, f *File) SendRequest {
	return SendRequest{Chat: b.chat, ReplyTo: b.reply, Silent: b.silent, Buttons: b.buttons, Text: text, File: f}
}

// Edit starts an edit of message id, with the builder's buttons.
func (b *Builder) Edit(id int) *EditBuilder { return &EditBuilder{b: b, id: id} }

// Delete deletes message id for everyone.
func (b *Builder) Delete(ctx context.Context, id int) error { return b.tg.Delete(ctx, b.chat, id) }

// Draft starts draft randomID of a private chat.
func (b *Builder) Draft(randomID int64) *DraftBuilder { return &DraftBuilder{b: b, id: randomID} }

// Files reads the files of message id: see Telegram.MessageFiles.
func (b *Builder) Files(ctx context.Context, id int, limit int64) ([]File, error) {
	return b.tg.MessageFiles(ctx, b.chat, id, limit)
}

// EditBuilder is an edit of a message. Get one from Builder.Edit.
type EditBuilder struct {
	b  *Builder
	id int
}

// Text edits the message into text. An edit that changes nothing counts
// as done.
func (e *EditBuilder) Text(ctx context.Context, text string) error {
	return e.b.tg.Edit(ctx, EditRequest{Chat: e.b.chat, ID: e.id, Text: text, Buttons: e.b.buttons})
}

// DraftBuilder is a draft of a private chat. Get one from Builder.Draft.
type DraftBuilder struct {
	b  *Builder
	id int64
}

// Text shows text in the draft, with a Stop button.
func (d *DraftBuilder) Text(ctx context.Context, text string) error {
	return d.b.tg.Draft(ctx, DraftRequest{Chat: d.b.chat, RandomID: d.id, Text: text})
}

// CallbackAnswer is the answer to a button press. Get one from
// Sender.Callback.
type CallbackAnswer struct {
	tg Telegram
	id int64
}

// Answer answers the press with a toast.
func (a *CallbackAnswer) Answer(ctx context.Context, toast string) error {
	return a.tg.AnswerCallback(ctx, a.id, toast)
}

// GuestQueryAnswer is the answer to a guest chat query. Get one from
// Sender.GuestQuery.
type GuestQueryAnswer struct {
	tg Telegram
	id int64
}

// Answer posts text as the query's answer and returns it.
func (a *GuestQueryAnswer) Answer(ctx context.Context, text string) (GuestMessage, error) {
	return a.tg.AnswerGuest(ctx, a.id, text)
}

// GuestEdit is an edit of a guest answer. Get one from Sender.Guest.
type GuestEdit struct {
	tg  Telegram
	req GuestEditRequest
}

// Caption sets the text under the file an edit attaches.
func (g *GuestEdit) Caption(text string) *GuestEdit {
	g.req.Text = text
	return g
}

// Text edits the answer into text.
func (g *GuestEdit) Text(ctx context.Context, text string) error {
	r := g.req
	r.Text = text
	return g.tg.EditGuest(ctx, r)
}

// File edits the answer into document f, under the caption.
func (g *GuestEdit) File(ctx context.Context, f File) error {
	r := g.req
	r.File = &f
	return g.tg.EditGuest(ctx, r)
}
