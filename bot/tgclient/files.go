package tgclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"

	"github.com/gotd/td/telegram/downloader"
	"github.com/gotd/td/telegram/message"
	"github.com/gotd/td/telegram/uploader"
	"github.com/gotd/td/tg"

	"shelljob.dev/shelljob/bot"
)

// upload uploads f, streamed from its Reader when it has one.
func upload(ctx context.Context, api *tg.Client, f bot.File) (tg.InputFileClass, error) {
	u := uploader.NewUploader(api)
	if f.Reader != nil {
		return u.Upload(ctx, uploader.NewUpload(f.Name, f.Reader, f.Size))
	}
	return u.FromBytes(ctx, f.Name, f.Data)
}

// documentMedia is an uploaded file sent as a document named name.
func documentMedia(up tg.InputFileClass, name string) *message.UploadedDocumentBuilder {
	mt := mime.TypeByExtension(path.Ext(name))
	if mt == "" {
		mt = "application/octet-stream"
	}
	return message.UploadedDocument(up).MIME(mt).ForceFile(true).Filename(name)
}

// MessageFiles implements bot.Telegram: the document or photo of a message.
// The size the message gives is checked before the download, and the
// download stops at limit bytes all the same.
func (a *API) MessageFiles(ctx context.Context, chat bot.Chat, id int, limit int64) ([]bot.File, error) {
	ids := []tg.InputMessageClass{&tg.InputMessageID{ID: id}}
	var res tg.MessagesMessagesClass
	var err error
	if chat.Kind == bot.PeerChannel {
		res, err = a.home().ChannelsGetMessages(ctx, &tg.ChannelsGetMessagesRequest{
			Channel: &tg.InputChannel{ChannelID: chat.PeerID, AccessHash: chat.AccessHash}, ID: ids,
		})
	} else {
		res, err = a.home().MessagesGetMessages(ctx, ids)
	}
	if err != nil {
		return nil, fmt.Errorf("get message: %w", err)
	}
	msgs, ok := res.AsModified()
	if !ok {
		return nil, nil
	}
	var files []bot.File
	for _, mc := range msgs.GetMessages() {
		m, ok := mc.(*tg.Message)
		if !ok || m.Media == nil {
			continue
		}
		loc, name, size := fileLocation(m)
		if loc == nil {
			continue
		}
		if limit > 0 && size > limit {
			return files, &bot.FileTooBigError{Name: name, Size: size, Limit: limit}
		}
		f, err := download(ctx, a.home(), loc, name, limit)
		if errors.Is(err, errOverLimit) {
			return files, &bot.FileTooBigError{Name: name, Size: max(size, limit+1), Limit: limit}
		}
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// download streams the file at loc into a temporary file, unlinked at
// once, that the returned File reads and its Close removes.
func download(ctx context.Context, api *tg.Client, loc tg.InputFileLocationClass, name string, limit int64) (bot.File, error) {
	tmp, err := os.CreateTemp("", "shelljob-in-*")
	if err != nil {
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	if err := os.Remove(tmp.Name()); err != nil {
		tmp.Close()
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	w := &capped{w: tmp, limit: limit}
	if _, err := downloader.NewDownloader().Download(api, loc).Stream(ctx, w); err != nil {
		tmp.Close()
		if errors.Is(err, errOverLimit) {
			return bot.File{}, err
		}
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	return bot.File{Name: name, Reader: tempFile{io.NewSectionReader(tmp, 0, w.n), tmp}, Size: w.n}, nil
}

// tempFile reads a downloaded file; Close removes it.
type tempFile struct {
	*io.SectionReader
	f *os.File
}

func (t tempFile) Close() error { return t.f.Close() }

var errOverLimit = errors.New("over the size limit")

// capped writes to w, and refuses to write past limit bytes (0: no limit).
type capped struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *capped) Write(p []byte) (int, error) {
	if c.limit > 0 && c.n+int64(len(p)) > c.limit {
		return 0, errOverLimit
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileLocation is where the file of m is, its name, and its size as the
// message gives it.
func fileLocation(m *tg.Message) (tg.InputFileLocationClass, string, int64) {
	switch md := m.Media.(type) {
	case *tg.MessageMediaDocument:
		d, ok := md.Document.(*tg.Document)
		if !ok {
			return nil, "", 0
		}
		name := fmt.Sprintf("file%d", m.ID)
		for _, at := range d.Attributes {
			if fn, ok := at.(*tg.DocumentAttributeFilename); ok && fn.FileName != "" {
				name = path.Base(fn.FileName)
			}
		}
		return &tg.InputDocumentFileLocation{ID: d.ID, AccessHash: d.AccessHash, FileReference: d.FileReference}, name, d.Size
	case *tg.MessageMediaPhoto:
		p, ok := md.Photo.(*tg.Photo)
		if !ok || len(p.Sizes) == 0 {
			return nil, "", 0
		}
		var kind string
		var size int64
		for _, s := range p.Sizes {
			switch s := s.(type) {
			case *tg.PhotoSize:
				kind, size = s.Type, int64(s.Size)
			case *tg.PhotoSizeProgressive:
				kind, size = s.Type, 0
				for _, n := range s.Sizes {
					size = max(size, int64(n))
				}
			case interface{ GetType() string }:
				kind = s.GetType()
			}
		}
		return &tg.InputPhotoFileLocation{ID: p.ID, AccessHash: p.AccessHash, FileReference: p.FileReference, ThumbSize: kind},
			fmt.Sprintf("photo%d.jpg", m.ID), size
	}
	return nil, "", 0
}
