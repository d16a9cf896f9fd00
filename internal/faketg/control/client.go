package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the control API of a fake over HTTP.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient makes a client for the control API at base, such as
// "http://127.0.0.1:8080". hc defaults to a client without a timeout:
// calls are bounded by their contexts.
func NewClient(base string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), hc: hc}
}

// pollWait is how long one long-poll of the client's waits lasts, so that
// a dropped connection is noticed.
const pollWait = 30 * time.Second

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = data
		return nil
	}
	return json.Unmarshal(data, out)
}

func call[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	err := c.do(ctx, method, path, body, &out)
	return out, err
}

// Info implements API: GET /v1/info.
func (c *Client) Info(ctx context.Context) (Info, error) {
	return call[Info](ctx, c, http.MethodGet, "/v1/info", nil)
}

// WaitConnected implements API: GET /v1/info?wait_connected=… until the
// bot is connected.
func (c *Client) WaitConnected(ctx context.Context) error {
	for {
		info, err := call[Info](ctx, c, http.MethodGet, "/v1/info?wait_connected="+pollFor(ctx, pollWait).String(), nil)
		if err != nil {
			return err
		}
		if info.Connected {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Send implements API: POST /v1/messages.
func (c *Client) Send(ctx context.Context, r SendRequest) (Message, error) {
	return call[Message](ctx, c, http.MethodPost, "/v1/messages", r)
}

// Press implements API: POST /v1/press. Without r.Timeout, the server
// waits for the answer until ctx's deadline (DefaultPressTimeout without
// one).
func (c *Client) Press(ctx context.Context, r PressRequest) (Answer, error) {
	if dl, ok := ctx.Deadline(); ok && r.Timeout == 0 {
		r.Timeout = Duration(max(time.Until(dl), time.Millisecond))
	}
	return call[Answer](ctx, c, http.MethodPost, "/v1/press", r)
}

// StopDraft implements API: POST /v1/drafts/stop.
func (c *Client) StopDraft(ctx context.Context, r StopDraftRequest) (Draft, error) {
	return call[Draft](ctx, c, http.MethodPost, "/v1/drafts/stop", r)
}

// Delete implements API: POST /v1/messages/delete.
func (c *Client) Delete(ctx context.Context, r DeleteRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/messages/delete", r, nil)
}

// Guest implements API: POST /v1/guest.
func (c *Client) Guest(ctx context.Context, r GuestRequest) (GuestQuery, error) {
	return call[GuestQuery](ctx, c, http.MethodPost, "/v1/guest", r)
}

// GuestAnswer implements API: GET /v1/guest/{query}.
func (c *Client) GuestAnswer(ctx context.Context, queryID int64) (Message, error) {
	return call[Message](ctx, c, http.MethodGet, "/v1/guest/"+strconv.FormatInt(queryID, 10), nil)
}

// Fail implements API: POST /v1/faults.
func (c *Client) Fail(ctx context.Context, r FaultRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/faults", r, nil)
}

// ClearFaults implements API: DELETE /v1/faults.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/v1/faults", nil, nil)
}

// Messages implements API: GET /v1/chats/{chat}/messages.
func (c *Client) Messages(ctx context.Context, chat int64) (Messages, error) {
	return call[Messages](ctx, c, http.MethodGet, fmt.Sprintf("/v1/chats/%d/messages", chat), nil)
}

// Events implements API: GET /v1/events.
func (c *Client) Events(ctx context.Context, q EventsQuery) (Events, error) {
	p := url.Values{}
	p.Set("after", strconv.Itoa(q.After))
	if q.Wait > 0 {
		p.Set("wait", q.Wait.String())
	}
	if q.Chat != 0 {
		p.Set("chat", strconv.FormatInt(q.Chat, 10))
	}
	if len(q.Kinds) > 0 {
		p.Set("kind", strings.Join(q.Kinds, ","))
	}
	return call[Events](ctx, c, http.MethodGet, "/v1/events?"+p.Encode(), nil)
}

// File implements API: GET /v1/files/{id}.
func (c *Client) File(ctx context.Context, id int64) ([]byte, error) {
	var b []byte
	err := c.do(ctx, http.MethodGet, FilePath(id), nil, &b)
	return b, err
}

// NewUser implements API: POST /v1/users.
func (c *Client) NewUser(ctx context.Context, r UserRequest) (User, error) {
	return call[User](ctx, c, http.MethodPost, "/v1/users", r)
}

// NewTopic implements API: POST /v1/chats/{chat}/topics.
func (c *Client) NewTopic(ctx context.Context, chat int64, r TopicRequest) (Topic, error) {
	return call[Topic](ctx, c, http.MethodPost, fmt.Sprintf("/v1/chats/%d/topics", chat), r)
}

// WaitEvent is a shorthand for WaitEvent(ctx, c, after, match).
func (c *Client) WaitEvent(ctx context.Context, after int, match func(Event) bool) (Event, error) {
	return WaitEvent(ctx, c, after, match)
}

// WaitMessage is a shorthand for WaitMessage(ctx, c, chat, match).
func (c *Client) WaitMessage(ctx context.Context, chat int64, match func(Message) bool) (Message, error) {
	return WaitMessage(ctx, c, chat, match)
}
