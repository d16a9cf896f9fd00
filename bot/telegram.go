package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// PeerKind is the MTProto kind of a chat.
type PeerKind string

const (
	PeerUser    PeerKind = "user"
	PeerChat    PeerKind = "chat"
	PeerChannel PeerKind = "channel"
)

// Chat is where a message is: enough to reach it again, also after a
// restart (it is kept in the preview annotation).
type Chat struct {
	// ID is the Bot API chat id: the user id, -chat id or -100… channel id.
	ID int64 `json:"id"`
	// Kind and PeerID, AccessHash name the MTProto peer.
	Kind       PeerKind `json:"kind"`
	PeerID     int64    `json:"peer"`
	AccessHash int64    `json:"hash,omitempty"`
	// Topic is the forum topic (its top message id), 0 for none.
	Topic int `json:"topic,omitempty"`
}

// Private tells whether the chat is a private chat with the bot.
func (c Chat) Private() bool { return c.Kind == PeerUser }

// Button is an inline button with callback data.
type Button struct {
	Text string
	Data string
}

// File is a file to send, or one a message holds.
type File struct {
	Name string
	Data []byte
	// Reader, when set, is streamed in place of Data: Size bytes are read
	// from it as the upload goes.
	Reader io.Reader
	Size   int64
	// Photo sends a picture as a photo rather than as a document.
	Photo bool
}

// Close releases what the file's Reader reads from, when it can be closed:
// a replied-to file is kept in a temporary file until its job has it.
func (f File) Close() error {
	if c, ok := f.Reader.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func closeFiles(files []File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// len is the file's length in bytes.
func (f File) len() int64 {
	if f.Reader != nil {
		return f.Size
	}
	return int64(len(f.Data))
}

// reader reads the file from its start.
func (f File) reader() io.Reader {
	if f.Reader != nil {
		return f.Reader
	}
	return bytes.NewReader(f.Data)
}

// FileTooBigError is a file over the bot's limit, refused before its
// download.
type FileTooBigError struct {
	Name string
	// Size is the file's size, or more than Limit when it is not known.
	Size, Limit int64
}

func (e *FileTooBigError) Error() string {
	return fmt.Sprintf("file %s is %d bytes, over the limit of %d", e.Name, e.Size, e.Limit)
}

// GuestMessage is a guest answer: Telegram's inline message id, encoded.
type GuestMessage struct {
	DC         int   `json:"dc"`
	OwnerID    int64 `json:"owner,omitempty"`
	ID         int64 `json:"id"`
	AccessHash int64 `json:"hash"`
	// Legacy is an inputBotInlineMessageID (no owner id).
	Legacy bool `json:"legacy,omitempty"`
}

// ErrUnavailable marks a Telegram call that failed for want of Telegram:
// no answer in time, a connection that kept dropping the request, or a
// server error. The same call may work a moment later, unlike a call that
// Telegram refused.
var ErrUnavailable = errors.New("telegram unavailable")

// Telegram carries the bot's requests to Telegram: tgclient.API, or a
// test's layer over it. The bot builds them with a Sender. All texts are
// plain text with no link preview.
type Telegram interface {
	// Send sends a new message and returns its id.
	Send(ctx context.Context, r SendRequest) (int, error)
	// Edit edits a message of a chat. An edit that changes nothing counts
	// as done.
	Edit(ctx context.Context, r EditRequest) error
	// Delete deletes message id of chat for everyone.
	Delete(ctx context.Context, chat Chat, id int) error
	// Draft shows or updates a draft in a private chat, with a Stop button.
	Draft(ctx context.Context, r DraftRequest) error
	// MessageFiles returns the files that message id of chat holds. A file
	// over limit bytes (0: no limit) is not downloaded: the error is a
	// *FileTooBigError.
	MessageFiles(ctx context.Context, chat Chat, id int, limit int64) ([]File, error)
	// AnswerCallback answers a button press with a toast.
	AnswerCallback(ctx context.Context, queryID int64, text string) error
	// AnswerGuest answers a guest chat query with text.
	AnswerGuest(ctx context.Context, queryID int64, text string) (GuestMessage, error)
	// EditGuest edits a guest answer, on the DC that holds it.
	EditGuest(ctx context.Context, r GuestEditRequest) error
}

// SendRequest is a new message: Text, or File when it is set.
type SendRequest struct {
	Chat Chat
	// ReplyTo is the message it replies to, 0 for none (in a forum topic:
	// the topic).
	ReplyTo int
	// Silent sends it without a notification.
	Silent bool
	// Buttons are the inline buttons under a text, nil for none.
	Buttons [][]Button
	Text    string
	// File, when set, is sent as a photo or a document in place of Text.
	File *File
}

// EditRequest edits message ID of Chat into Text, with Buttons: nil
// removes the old ones.
type EditRequest struct {
	Chat    Chat
	ID      int
	Text    string
	Buttons [][]Button
}

// DraftRequest shows Text in draft RandomID of a private chat.
type DraftRequest struct {
	Chat     Chat
	RandomID int64
	Text     string
}

// GuestEditRequest edits guest answer Message into Text or, when File is
// set, into that document with the caption Text under it. A guest answer
// cannot take a new upload, so File is uploaded and stored first
// (messages.uploadMedia), and the edit names the stored document.
type GuestEditRequest struct {
	Message GuestMessage
	Text    string
	File    *File
}

// previewNote is the AnnotationPreview of a job: where its preview and its
// approval message are, so that a restarted bot can continue them.
type previewNote struct {
	Chat Chat `json:"chat"`
	// Msg is the edited preview's id, Draft a draft's random id.
	Msg   int   `json:"msg,omitempty"`
	Draft int64 `json:"draft,omitempty"`
	// Guest is the guest answer, with GuestChat the guest chat's key.
	Guest     *GuestMessage `json:"guest,omitempty"`
	GuestChat string        `json:"guestChat,omitempty"`
	GroupPace bool          `json:"groupPace,omitempty"`
	// Approval is the message that asks for the job's approval.
	Approval *approvalNote `json:"approval,omitempty"`
}

func (n previewNote) encode() string {
	b, _ := json.Marshal(n)
	return string(b)
}
