package delivery

// Route is how a chat job's final goes out, after its preview and the
// caller's final mode (settings.Final).
type Route int

const (
	// Reply: a reply to the command, as before live output: the text, or
	// the .txt file of a long final. A job with no preview goes so.
	Reply Route = iota
	// ReplyAfterDraft: the draft shows the final's text, then the reply
	// goes out (a draft preview, the new-reply mode).
	ReplyAfterDraft
	// ReplyThenRemove: the reply, then the preview is deleted, or, when it
	// cannot be, edited to say the output is below (an edited preview,
	// the new-reply mode).
	ReplyThenRemove
	// DraftThenMessage: the draft shows the final's message, which then
	// goes out; a long final's file replies to it (a draft preview).
	DraftThenMessage
	// EditInPlace: the preview is edited into the final's message; a long
	// final's file replies to it. An edit that fails sends the Reply and
	// deletes the preview (an edited preview).
	EditInPlace
)

// RouteOf is the Route of the final of a chat job whose preview shows as
// kind, for a caller who asked for new replies or not.
func RouteOf(kind Kind, newReply bool) Route {
	switch {
	case kind == NoPreview:
		return Reply
	case newReply && kind == DraftPreview:
		return ReplyAfterDraft
	case newReply:
		return ReplyThenRemove
	case kind == DraftPreview:
		return DraftThenMessage
	default:
		return EditInPlace
	}
}
