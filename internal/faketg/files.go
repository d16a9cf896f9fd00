package faketg

import (
	"fmt"
	"sync"
	"time"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// fileService holds the files: the parts of the bot's uploads, put
// together when a request names them, and every file sent (Media), within
// Options.FileBytes.
type fileService struct {
	s *Server

	mu      sync.Mutex
	uploads map[int64]map[int][]byte // the bot's upload parts by file ID
	// assembled are the bot's uploads once put together: a retried send
	// may name the same upload again.
	assembled map[int64][]byte
	media     map[int64]*Media // files sent, by document/photo ID
	// kept lists the IDs of media and uploads whose bytes are held, oldest
	// first, and keptBytes their sum, for Options.FileBytes.
	kept       []keptFile
	keptBytes  int64
	nextFileID int64
}

func newFileService(s *Server) *fileService {
	return &fileService{s: s, uploads: map[int64]map[int][]byte{}, assembled: map[int64][]byte{}, media: map[int64]*Media{}, nextFileID: 5000001}
}

func (f *fileService) register(d *tgtest.Dispatcher) {
	d.HandleFunc(tg.UploadSaveFilePartRequestTypeID, f.savePart)
	d.HandleFunc(tg.UploadSaveBigFilePartRequestTypeID, f.savePart)
	handle(d, tg.UploadGetFileRequestTypeID, f.getFile)
	handle(d, tg.MessagesUploadMediaRequestTypeID, f.uploadMedia)
}

// savePart serves upload.saveFilePart and upload.saveBigFilePart. Parts
// may come in any order and the last one may be shorter, as on Telegram.
func (f *fileService) savePart(srv *tgtest.Server, req *tgtest.Request) error {
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
	f.s.journal.call(methodName(id), nil)
	switch {
	case len(data) == 0:
		return tgerr.New(400, "FILE_PART_EMPTY")
	case len(data) > 512*1024:
		return tgerr.New(400, "FILE_PART_TOO_BIG")
	case part < 0 || part >= 8000:
		return tgerr.New(400, "FILE_PART_INVALID")
	}
	f.mu.Lock()
	parts := f.uploads[fileID]
	if parts == nil {
		parts = map[int][]byte{}
		f.uploads[fileID] = parts
	}
	parts[part] = append([]byte(nil), data...)
	f.mu.Unlock()
	return srv.SendBool(req, true)
}

// uploaded assembles a file the bot uploaded.
func (f *fileService) uploaded(in tg.InputFileClass) ([]byte, string, error) {
	var (
		fileID int64
		n      int
		name   string
	)
	switch in := in.(type) {
	case *tg.InputFile:
		fileID, n, name = in.ID, in.Parts, in.Name
	case *tg.InputFileBig:
		fileID, n, name = in.ID, in.Parts, in.Name
	default:
		return nil, "", tgerr.New(400, "FILE_PARTS_INVALID")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if data, ok := f.assembled[fileID]; ok {
		return data, name, nil
	}
	parts := f.uploads[fileID]
	var data []byte
	for i := 0; i < n; i++ {
		p, ok := parts[i]
		if !ok {
			return nil, "", tgerr.New(400, fmt.Sprintf("FILE_PART_%d_MISSING", i))
		}
		data = append(data, p...)
	}
	delete(f.uploads, fileID)
	f.assembled[fileID] = data
	f.keepLocked(keptFile{id: fileID, upload: true, bytes: int64(len(data))})
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
func (f *fileService) keepLocked(k keptFile) {
	f.kept = append(f.kept, k)
	f.keptBytes += k.bytes
	for f.keptBytes > f.s.opts.FileBytes && len(f.kept) > 1 {
		old := f.kept[0]
		f.kept = f.kept[1:]
		f.keptBytes -= old.bytes
		if old.upload {
			delete(f.assembled, old.id)
		} else if md := f.media[old.id]; md != nil {
			md.Data = nil
		}
	}
}

// FileBytes is the cap on the bytes of files the server keeps.
func (s *Server) FileBytes() int64 { return s.opts.FileBytes }

// ID is the file's document or photo ID, for Server.File.
func (md *Media) ID() int64 { return md.id }

// File returns a copy of a file sent by a user or uploaded by the bot, by
// its Media.ID.
func (s *Server) File(id int64) (Media, bool) {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	md, ok := s.files.media[id]
	if !ok {
		return Media{}, false
	}
	return *md, true
}

// addMedia gives md a new ID and access hash and stores it.
func (f *fileService) addMedia(md *Media) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextFileID++
	md.id, md.accessHash = f.nextFileID, f.nextFileID*31
	if md.Data != nil {
		md.Size = len(md.Data)
	}
	f.media[md.id] = md
	f.keepLocked(keptFile{id: md.id, bytes: int64(len(md.Data))})
}

// uploadMedia serves messages.uploadMedia: it stores a file the bot
// uploaded, in no message, and returns it as a document or photo that a
// later request names (an inline message's edit, which takes no new
// upload). The peer is the bot itself or a chat it may write in.
func (f *fileService) uploadMedia(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesUploadMediaRequest) error {
	now := time.Now()
	md, ferr := f.inputMedia(r.Media)
	ev := f.s.describe(r, now)
	if _, self := r.Peer.(*tg.InputPeerSelf); !self {
		if _, err := f.s.peers.resolve(r.Peer); err != nil {
			ev.Err = err
		}
	}
	if ev.Err == nil && ferr != nil {
		ev.Err = ferr
	}
	if ev.Err != nil {
		f.s.journal.record(ev)
		return ev.Err
	}
	if md.id == 0 {
		f.addMedia(md)
	}
	ev.Media = md
	f.s.journal.record(ev)
	return srv.SendResult(req, md.tg(f.s.opts.DC, now))
}

// inlineMedia reads the media of an inline message's edit: only a stored
// document or photo (uploadMedia, or a message's), as on Telegram, where
// an inline message cannot take a new upload.
func (f *fileService) inlineMedia(r *tg.MessagesEditInlineBotMessageRequest) (*Media, *tgerr.Error) {
	in, ok := r.GetMedia()
	if !ok {
		return nil, nil
	}
	switch in.(type) {
	case *tg.InputMediaDocument, *tg.InputMediaPhoto:
		return f.inputMedia(in)
	default:
		return nil, tgerr.New(400, "MEDIA_INVALID")
	}
}

// inputMedia reads the file of a bot's messages.sendMedia.
func (f *fileService) inputMedia(in tg.InputMediaClass) (*Media, *tgerr.Error) {
	switch in := in.(type) {
	case *tg.InputMediaUploadedDocument:
		data, name, err := f.uploaded(in.File)
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
		data, name, err := f.uploaded(in.File)
		if err != nil {
			return nil, tgerr.New(400, "FILE_PARTS_INVALID")
		}
		return &Media{Photo: true, Filename: name, MIME: "image/jpeg", Data: data}, nil
	case *tg.InputMediaDocument:
		if d, ok := in.ID.(*tg.InputDocument); ok {
			f.mu.Lock()
			md := f.media[d.ID]
			f.mu.Unlock()
			if md != nil && !md.Photo && md.accessHash == d.AccessHash {
				c := *md
				return &c, nil
			}
		}
		return nil, tgerr.New(400, "MEDIA_INVALID")
	case *tg.InputMediaPhoto:
		if p, ok := in.ID.(*tg.InputPhoto); ok {
			f.mu.Lock()
			md := f.media[p.ID]
			f.mu.Unlock()
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
func (f *fileService) getFile(srv *tgtest.Server, req *tgtest.Request, r *tg.UploadGetFileRequest) error {
	f.s.journal.call("upload.getFile", r)
	f.mu.Lock()
	var md *Media
	switch loc := r.Location.(type) {
	case *tg.InputDocumentFileLocation:
		if m := f.media[loc.ID]; m != nil && !m.Photo && m.accessHash == loc.AccessHash {
			md = m
		}
	case *tg.InputPhotoFileLocation:
		if m := f.media[loc.ID]; m != nil && m.Photo && m.accessHash == loc.AccessHash {
			md = m
		}
	}
	var data []byte
	size := 0
	if md != nil {
		data, size = md.Data, md.Size
	}
	f.mu.Unlock()
	switch {
	case md == nil:
		return tgerr.New(400, "LOCATION_INVALID")
	case data == nil && size > 0:
		return tgerr.New(400, "FILE_REFERENCE_EXPIRED")
	case r.Limit <= 0 || r.Limit > 1024*1024:
		return tgerr.New(400, "LIMIT_INVALID")
	case r.Offset < 0:
		return tgerr.New(400, "OFFSET_INVALID")
	}
	var part []byte
	if r.Offset < int64(len(data)) {
		end := min(r.Offset+int64(r.Limit), int64(len(data)))
		part = data[r.Offset:end]
	}
	var typ tg.StorageFileTypeClass = &tg.StorageFilePartial{}
	if md.Photo {
		typ = &tg.StorageFileJpeg{}
	}
	return srv.SendResult(req, &tg.UploadFile{Type: typ, Mtime: int(time.Now().Unix()), Bytes: append([]byte{}, part...)})
}
