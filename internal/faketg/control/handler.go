package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"shelljob.dev/shelljob/internal/faketg"
)

// MaxWait caps the long-poll of GET /v1/events and /v1/info.
const MaxWait = 5 * time.Minute

// NewHandler serves the control API of s (see the package doc), and
// GET /healthz.
func NewHandler(s *faketg.Server) http.Handler {
	return NewService(s).Handler()
}

// Handler serves the service over HTTP.
func (v *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, r *http.Request) {
		wait, err := waitParam(r, "wait_connected")
		if err != nil {
			fail(w, err)
			return
		}
		if wait > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), wait)
			defer cancel()
			_ = v.WaitConnected(ctx)
		}
		respond(w)(v.Info(r.Context()))
	})
	mux.HandleFunc("POST /v1/users", post(v.NewUser))
	mux.HandleFunc("POST /v1/messages", post(v.Send))
	mux.HandleFunc("POST /v1/messages/delete", post(func(ctx context.Context, r DeleteRequest) (struct{}, error) {
		return struct{}{}, v.Delete(ctx, r)
	}))
	mux.HandleFunc("POST /v1/press", post(v.Press))
	mux.HandleFunc("POST /v1/drafts/stop", post(v.StopDraft))
	mux.HandleFunc("POST /v1/guest", post(v.Guest))
	mux.HandleFunc("GET /v1/guest/{query}", func(w http.ResponseWriter, r *http.Request) {
		id, err := pathInt(r, "query")
		if err != nil {
			fail(w, err)
			return
		}
		respond(w)(v.GuestAnswer(r.Context(), id))
	})
	mux.HandleFunc("POST /v1/faults", post(func(ctx context.Context, r FaultRequest) (struct{}, error) {
		return struct{}{}, v.Fail(ctx, r)
	}))
	mux.HandleFunc("DELETE /v1/faults", func(w http.ResponseWriter, r *http.Request) {
		respond(w)(struct{}{}, v.ClearFaults(r.Context()))
	})
	mux.HandleFunc("GET /v1/chats/{chat}/messages", func(w http.ResponseWriter, r *http.Request) {
		id, err := pathInt(r, "chat")
		if err != nil {
			fail(w, err)
			return
		}
		respond(w)(v.Messages(r.Context(), id))
	})
	mux.HandleFunc("POST /v1/chats/{chat}/topics", func(w http.ResponseWriter, r *http.Request) {
		id, err := pathInt(r, "chat")
		if err != nil {
			fail(w, err)
			return
		}
		post(func(ctx context.Context, t TopicRequest) (Topic, error) { return v.NewTopic(ctx, id, t) })(w, r)
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		q, err := eventsQuery(r)
		if err != nil {
			fail(w, err)
			return
		}
		respond(w)(v.Events(r.Context(), q))
	})
	mux.HandleFunc("GET /v1/files/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := pathInt(r, "id")
		if err != nil {
			fail(w, err)
			return
		}
		md, err := v.file(id)
		if err != nil {
			fail(w, err)
			return
		}
		if md.MIME != "" {
			w.Header().Set("Content-Type", md.MIME)
		}
		if md.Filename != "" {
			w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": md.Filename}))
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(md.Data)))
		_, _ = w.Write(md.Data)
	})
	return mux
}

// post decodes a JSON request body for f and replies with its result.
func post[Req, Resp any](f func(context.Context, Req) (Resp, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			fail(w, errorf(http.StatusBadRequest, "request body: %v", err))
			return
		}
		respond(w)(f(r.Context(), req))
	}
}

// respond returns a function that writes the result of a call: its value
// as JSON, or its error with the error's status (an *Error's, 499 for a
// request the client gave up, else 500).
func respond(w http.ResponseWriter) func(any, error) {
	return func(v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = &Error{Status: http.StatusInternalServerError, Message: err.Error()}
				if errors.Is(err, context.Canceled) {
					e.Status = 499
				}
			}
			w.WriteHeader(e.Status)
			v = e
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

func fail(w http.ResponseWriter, err error) { respond(w)(nil, err) }

func pathInt(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "%s: %v", name, err)
	}
	return id, nil
}

func waitParam(r *http.Request, name string) (time.Duration, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "%s: %v", name, err)
	}
	return min(d, MaxWait), nil
}

func eventsQuery(r *http.Request) (EventsQuery, error) {
	var q EventsQuery
	var err error
	p := r.URL.Query()
	if v := p.Get("after"); v != "" {
		if q.After, err = strconv.Atoi(v); err != nil {
			return q, errorf(http.StatusBadRequest, "after: %v", err)
		}
	}
	if v := p.Get("chat"); v != "" {
		if q.Chat, err = strconv.ParseInt(v, 10, 64); err != nil {
			return q, errorf(http.StatusBadRequest, "chat: %v", err)
		}
	}
	for _, k := range p["kind"] {
		q.Kinds = append(q.Kinds, strings.Split(k, ",")...)
	}
	q.Wait, err = waitParam(r, "wait")
	return q, err
}
