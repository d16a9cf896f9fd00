// Package control is a remote control for a fake Telegram (faketg): an
// HTTP+JSON API over a *faketg.Server, and a Go client for it. The
// end-to-end suite drives a fake that runs in a kind pod with it, as a
// chat admin would, and cmd/faketg -connect runs its terminal chat
// against it.
//
//	http.Handle("/", control.NewHandler(srv))          // the fake's side
//	c := control.NewClient("http://127.0.0.1:8080", nil) // the test's side
//	info, _ := c.Info(ctx)
//	m, _ := c.Send(ctx, control.SendRequest{Chat: group, Text: ".a ls"})
//	ev, _ := c.WaitEvent(ctx, info.Seq, func(e control.Event) bool { return e.Kind == "edit" })
//
// Service is the same API in process: API is the interface of both.
//
// # Identifiers
//
// Users are named by their IDs, chats by their Bot API IDs (the user's ID
// for a private chat, -ID for a basic group, -100…ID for a supergroup or
// forum), messages by chat and ID, files by their media ID, and the bot's
// calls by their sequence number in the fake's log (from 1). A request
// without a user acts as the first admin, and one without a chat in the
// user's private chat.
//
// # Endpoints
//
// Bodies and results are JSON, the types of this package; times are RFC
// 3339, durations strings such as "15s", byte fields base64. Errors come
// with a 4xx or 5xx status and {"error": "…"}: 400 for a bad request, 404
// for an unknown user, chat, message, query or file, 409 for a user ID
// taken, 504 when the bot did not answer a press in time.
//
//	GET  /healthz                    "ok": the pod's readiness
//	GET  /v1/info[?wait_connected=D] Info: bot, users, chats, connected, seq, instance;
//	                                 with wait_connected, first waits up to D for the bot
//	POST /v1/users                   UserRequest → User
//	POST /v1/messages                SendRequest → Message (text, reply_to, topic,
//	                                 forwarded, document {name, mime, data} or photo)
//	POST /v1/messages/delete         DeleteRequest {chat, id} → {}
//	POST /v1/press                   PressRequest {user, chat, msg_id, data?, no_wait, timeout}
//	                                 → Answer (the toast), waiting for it
//	POST /v1/drafts/stop             StopDraftRequest {user, random_id?} → Draft
//	POST /v1/guest                   GuestRequest {user, chat?, text, reply_to} → GuestQuery
//	GET  /v1/guest/{query}           Message: the bot's answer, edits applied
//	POST /v1/faults                  FaultRequest {method, n, error} → {}
//	DELETE /v1/faults                clears every fault → {}
//	GET  /v1/chats/{chat}/messages   Messages {seq, messages}: edits applied, deleted ones marked
//	POST /v1/chats/{chat}/topics     TopicRequest {title} → Topic (forums)
//	GET  /v1/events?after=N[&wait=D][&chat=ID][&kind=K,…]
//	                                 Events {events, last}: the bot's calls after N,
//	                                 long-polling up to D (at most MaxWait) for one
//	GET  /v1/files/{id}              the bytes of a file (Media.URL), with its MIME type
//
// An event's kind is faketg's: send, edit, draft, typing, delete, upload,
// toast, commands, guest_result, inline_edit, call or unknown. A fake that
// restarted has a new Info.Instance, and its sequence numbers and message
// IDs start over.
package control
