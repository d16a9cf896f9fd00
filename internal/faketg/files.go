package faketg

import (
	"fmt"
	"time"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// savePart serves upload.saveFilePart and upload.saveBigFilePart. Parts
// may come in any order and the last one may be shorter, as on Telegram.
func (s *Server) savePart(srv *tgtest.Server, req *tgtest.Request) error {
	id, _ := req.Buf.PeekID()
	var (
		fileID int64
		part   int
		data   []byte
	)
	switch id {
	case tg.UploadSaveFilePartRequestTypeID:
		var r tg.UploadSaveFilePartRequest
		if err := r.Decode(req.Buf); err != nil {
			return err
		}
		fileID, part, data = r.FileID, r.FilePart, r.Bytes
	default:
		var r tg.UploadSaveBigFilePartRequest
		if err := r.Decode(req.Buf); err != nil {
			return err
		}
		fileID, part, data = r.FileID, r.FilePart, r.Bytes
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call(methodName(id), nil)
	switch {
	case len(data) == 0:
		return tgerr.New(400, "FILE_PART_EMPTY")
	case len(data) > 512*1024:
		return tgerr.New(400, "FILE_PART_TOO_BIG")
	case part < 0 || part >= 8000:
		return tgerr.New(400, "FILE_PART_INVALID")
	}
	parts := s.uploads[fileID]
	if parts == nil {
		parts = map[int][]byte{}
		s.uploads[fileID] = parts
	}
	parts[part] = append([]byte(nil), data...)
	return srv.SendBool(req, true)
}

// uploaded assembles a file the bot uploaded.
func (s *Server) uploaded(in tg.InputFileClass) ([]byte, string, error) {
	var (
		fileID int64
		n      int
		name   string
	)
	switch f := in.(type) {
	case *tg.InputFile:
		fileID, n, name = f.ID, f.Parts, f.Name
	case *tg.InputFileBig:
		fileID, n, name = f.ID, f.Parts, f.Name
	default:
		return nil, "", tgerr.New(400, "FILE_PARTS_INVALID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if data, ok := s.assembled[fileID]; ok {
		return data, name, nil
	}
	parts := s.uploads[fileID]
	var data []byte
	for i := 0; i < n; i++ {
		p, ok := parts[i]
		if !ok {
			return nil, "", tgerr.New(400, fmt.Sprintf("FILE_PART_%d_MISSING", i))
		}
		data = append(data, p...)
	}
	delete(s.uploads, fileID)
	s.assembled[fileID] = data
	s.keepLocked(keptFile{id: fileID, upload: true, bytes: int64(len(data))})
	return data, name, nil
}

// A keptFile is a file whose bytes the server holds.
type keptFile struct {
	id     int64
	upload bool // an assembled upload; a media's ID otherwise
	bytes  int64
}

// keepLocked records a file's bytes, and lets the oldest go while the sum
// is over Options.FileBytes. A file bigger than the cap is still kept
// until the next one comes.
func (s *Server) keepLocked(f keptFile) {
	s.kept = append(s.kept, f)
	s.keptBytes += f.bytes
	for s.keptBytes > s.opts.FileBytes && len(s.kept) > 1 {
		old := s.kept[0]
		s.kept = s.kept[1:]
		s.keptBytes -= old.bytes
		if old.upload {
			delete(s.assembled, old.id)
		} else if md := s.media[old.id]; md != nil {
			md.Data = nil
		}
	}
}

// FileBytes is the cap on the bytes of files the server keeps.
func (s *Server) FileBytes() int64 { return s.opts.FileBytes }

func (s *Server) sendMedia(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSendMediaRequest) error {
	now := time.Now()
	md, ferr := s.inputMedia(r.Media)
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	if ev.Err == nil && ferr != nil {
		ev.Err = ferr
	}
	if ev.Err == nil && utf16Len(r.Message) > maxCaptionUnits {
		ev.Err = tgerr.New(400, "MEDIA_CAPTION_TOO_LONG")
	}
	if ev.Err != nil {
		s.recordLocked(ev)
		return ev.Err
	}
	s.addMediaLocked(md)
	ev.Media = md
	return s.sendLocked(srv, req, ev, &Message{
		Chat: ev.Chat, Out: true, Text: r.Message, Entities: r.Entities,
		ReplyTo: ev.ReplyTo, TopicID: ev.TopMsgID, Silent: r.Silent,
		Buttons: ev.Buttons, Media: md, Date: now,
	}, r.RandomID)
}

// ID is the file's document or photo ID, for Server.File.
func (md *Media) ID() int64 { return md.id }

// File returns a copy of a file sent by a user or uploaded by the bot, by
// its Media.ID.
func (s *Server) File(id int64) (Media, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md, ok := s.media[id]
	if !ok {
		return Media{}, false
	}
	return *md, true
}

// addMediaLocked gives md a new ID and access hash and stores it.
func (s *Server) addMediaLocked(md *Media) {
	s.nextFileID++
	md.id, md.accessHash = s.nextFileID, s.nextFileID*31
	if md.Data != nil {
		md.Size = len(md.Data)
	}
	s.media[md.id] = md
	s.keepLocked(keptFile{id: md.id, bytes: int64(len(md.Data))})
}

// uploadMedia serves messages.uploadMedia: it stores a file the bot
// uploaded, in no message, and returns it as a document or photo that a
// later request names (an inline message's edit, which takes no new
// upload). The peer is the bot itself or a chat it may write in.
func (s *Server) uploadMedia(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesUploadMediaRequest) error {
	now := time.Now()
	md, ferr := s.inputMedia(r.Media)
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	if _, self := r.Peer.(*tg.InputPeerSelf); !self {
		if _, err := s.peerLocked(r.Peer); err != nil {
			ev.Err = err
		}
	}
	if ev.Err == nil && ferr != nil {
		ev.Err = ferr
	}
	if ev.Err != nil {
		s.recordLocked(ev)
		return ev.Err
	}
	if md.id == 0 {
		s.addMediaLocked(md)
	}
	ev.Media = md
	s.recordLocked(ev)
	return srv.SendResult(req, md.tg(s.opts.DC, now))
}

// inlineMedia reads the media of an inline message's edit: only a stored
// document or photo (uploadMedia, or a message's), as on Telegram, where
// an inline message cannot take a new upload.
func (s *Server) inlineMedia(r *tg.MessagesEditInlineBotMessageRequest) (*Media, *tgerr.Error) {
	in, ok := r.GetMedia()
	if !ok {
		return nil, nil
	}
	switch in.(type) {
	case *tg.InputMediaDocument, *tg.InputMediaPhoto:
		return s.inputMedia(in)
	default:
		return nil, tgerr.New(400, "MEDIA_INVALID")
	}
}

// inputMedia reads the file of a bot's messages.sendMedia.
func (s *Server) inputMedia(in tg.InputMediaClass) (*Media, *tgerr.Error) {
	switch in := in.(type) {
	case *tg.InputMediaUploadedDocument:
		data, name, err := s.uploaded(in.File)
		if err != nil {
			return nil, tgerr.New(400, "FILE_PARTS_INVALID")
		}
		md := &Media{Filename: name, MIME: in.MimeType, ForceFile: in.ForceFile, Data: data}
		for _, a := range in.Attributes {
			if f, ok := a.(*tg.DocumentAttributeFilename); ok {
				md.Filename = f.FileName
			}
		}
		return md, nil
	case *tg.InputMediaUploadedPhoto:
		data, name, err := s.uploaded(in.File)
		if err != nil {
			return nil, tgerr.New(400, "FILE_PARTS_INVALID")
		}
		return &Media{Photo: true, Filename: name, MIME: "image/jpeg", Data: data}, nil
	case *tg.InputMediaDocument:
		if d, ok := in.ID.(*tg.InputDocument); ok {
			s.mu.Lock()
			md := s.media[d.ID]
			s.mu.Unlock()
			if md != nil && !md.Photo && md.accessHash == d.AccessHash {
				c := *md
				return &c, nil
			}
		}
		return nil, tgerr.New(400, "MEDIA_INVALID")
	case *tg.InputMediaPhoto:
		if p, ok := in.ID.(*tg.InputPhoto); ok {
			s.mu.Lock()
			md := s.media[p.ID]
			s.mu.Unlock()
			if md != nil && md.Photo && md.accessHash == p.AccessHash {
				c := *md
				return &c, nil
			}
		}
		return nil, tgerr.New(400, "MEDIA_INVALID")
	default:
		return nil, tgerr.New(400, "MEDIA_INVALID")
	}
}

// getFile serves documents and photos sent by users (and the bot).
func (s *Server) getFile(srv *tgtest.Server, req *tgtest.Request, r *tg.UploadGetFileRequest) error {
	s.mu.Lock()
	s.call("upload.getFile", r)
	var md *Media
	switch loc := r.Location.(type) {
	case *tg.InputDocumentFileLocation:
		if m := s.media[loc.ID]; m != nil && !m.Photo && m.accessHash == loc.AccessHash {
			md = m
		}
	case *tg.InputPhotoFileLocation:
		if m := s.media[loc.ID]; m != nil && m.Photo && m.accessHash == loc.AccessHash {
			md = m
		}
	}
	s.mu.Unlock()
	switch {
	case md == nil:
		return tgerr.New(400, "LOCATION_INVALID")
	case md.Data == nil && md.Size > 0:
		return tgerr.New(400, "FILE_REFERENCE_EXPIRED")
	case r.Limit <= 0 || r.Limit > 1024*1024:
		return tgerr.New(400, "LIMIT_INVALID")
	case r.Offset < 0:
		return tgerr.New(400, "OFFSET_INVALID")
	}
	var part []byte
	if r.Offset < int64(len(md.Data)) {
		end := min(r.Offset+int64(r.Limit), int64(len(md.Data)))
		part = md.Data[r.Offset:end]
	}
	var typ tg.StorageFileTypeClass = &tg.StorageFilePartial{}
	if md.Photo {
		typ = &tg.StorageFileJpeg{}
	}
	return srv.SendResult(req, &tg.UploadFile{Type: typ, Mtime: int(time.Now().Unix()), Bytes: append([]byte{}, part...)})
}
