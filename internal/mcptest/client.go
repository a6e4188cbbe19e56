// Package mcptest is the MCP client that execd's tests, the soak and the
// load tool share: requests of either era with the headers a conforming
// client sends, the answer reader (JSON or SSE), and the helpers that call
// a tool and read its result. It imports nothing of execd, so that every
// package's tests may use it.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Client talks to one MCP endpoint over HTTP. With a Session, or with
// Legacy set (before Initialize gives it one), it speaks the legacy era;
// otherwise the modern era.
//
// T is used only by the methods that fail the test (Post, Initialize, Tool,
// RPC, Stream, Respond). Send, Handshake and Call report errors instead, so
// that goroutines, and programs without a test (the soak, the load tool),
// use those, with T nil.
type Client struct {
	T       testing.TB
	URL     string       // the endpoint, ".../mcp"
	Session string       // Mcp-Session-Id; "" in the modern era
	Version string       // the legacy version Initialize negotiated, sent as MCP-Protocol-Version
	Offer   string       // the version Handshake offers; LegacyVersion when ""
	Token   string       // a bearer token; "" for none
	Legacy  bool         // the legacy era even without a session
	HTTP    *http.Client // nil: http.DefaultClient
	// Caps are the clientCapabilities of a modern request; nil means {}.
	Caps map[string]any

	lastID atomic.Int64
}

// TasksCaps are modern clientCapabilities that declare the tasks
// extension.
func TasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
}

func (c *Client) modern() bool { return c.Session == "" && !c.Legacy }

// NextID is a request id not used before by this client (1, 2, …).
func (c *Client) NextID() int64 { return c.lastID.Add(1) }

// Send posts body with the client's session, negotiated version and token,
// accepting JSON and SSE, and the given headers last (they override).
func (c *Client) Send(ctx context.Context, body []byte, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
		if c.Version != "" {
			req.Header.Set("MCP-Protocol-Version", c.Version)
		}
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(req)
}

// Request encodes a request of the client's era: its body, and the headers
// the modern era mirrors from it (Modern). params gains the modern _meta.
func (c *Client) Request(id any, method string, params map[string]any) ([]byte, map[string]string) {
	if params == nil {
		params = map[string]any{}
	}
	var hdr map[string]string
	if c.modern() {
		if c.Caps != nil {
			meta, _ := params["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
				params["_meta"] = meta
			}
			if meta["io.modelcontextprotocol/clientCapabilities"] == nil {
				meta["io.modelcontextprotocol/clientCapabilities"] = c.Caps
			}
		}
		hdr = Modern(method, params)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err) // params of maps, strings and numbers always encode
	}
	return body, hdr
}

// Errors of Call.
var (
	// ErrClosed: onFrame asked to close the stream before the answer.
	ErrClosed = errors.New("mcptest: the client closed the stream")
	// ErrNoAnswer: the answer ended without a response.
	ErrNoAnswer = errors.New("mcptest: the answer ended without a response")
)

// Call sends one request of the client's era and returns its response.
// onFrame, if not nil, sees every message with a method (notifications,
// server requests) that comes before the response; when it returns false
// the stream is closed at once, as a client that goes away closes it, and
// Call returns ErrClosed. The answer is read to its end, so that its
// connection can be used again.
func (c *Client) Call(ctx context.Context, id any, method string, params map[string]any, onFrame func(map[string]any) bool) (map[string]any, error) {
	body, hdr := c.Request(id, method, params)
	resp, err := c.Send(ctx, body, hdr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var answer map[string]any
	closed := false
	err = Read(resp, func(m map[string]any) bool {
		if answer != nil {
			return true
		}
		if _, ok := m["method"]; !ok {
			answer = m
		} else if onFrame != nil && !onFrame(m) {
			closed = true
			return false
		}
		return true
	})
	switch {
	case closed:
		return nil, ErrClosed
	case answer != nil:
		return answer, nil
	case err != nil:
		return nil, err
	}
	return nil, ErrNoAnswer
}

// Handshake starts a legacy session declaring the client capabilities caps
// (a JSON object): initialize with Offer (LegacyVersion), then
// notifications/initialized. It keeps the session id and the negotiated
// version.
func (c *Client) Handshake(ctx context.Context, caps string) error {
	c.Legacy = true
	offer := c.Offer
	if offer == "" {
		offer = LegacyVersion
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + offer +
		`","capabilities":` + caps + `,"clientInfo":{"name":"execd-mcptest","version":"1"}}}`
	resp, err := c.Send(ctx, []byte(body), nil)
	if err != nil {
		return err
	}
	var msg map[string]any
	err = Read(resp, func(m map[string]any) bool { msg = m; return false })
	resp.Body.Close()
	res, _ := msg["result"].(map[string]any)
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK || res == nil:
		return errors.New("initialize: HTTP " + resp.Status + ": " + strings.TrimSpace(string(mustJSON(msg))))
	case resp.Header.Get("Mcp-Session-Id") == "":
		return errors.New("initialize: no Mcp-Session-Id")
	}
	c.Session = resp.Header.Get("Mcp-Session-Id")
	c.Version, _ = res["protocolVersion"].(string)
	resp, err = c.Send(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return errors.New("notifications/initialized: HTTP " + resp.Status)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Post is Send of a hand-written body; a transport error fails the test.
func (c *Client) Post(ctx context.Context, body string, hdr map[string]string) *http.Response {
	c.T.Helper()
	resp, err := c.Send(ctx, []byte(body), hdr)
	if err != nil {
		c.T.Fatal(err)
	}
	return resp
}

// Initialize starts a legacy session without client capabilities.
func (c *Client) Initialize() { c.InitializeWith(`{}`) }

// InitializeWith is Handshake; an error fails the test.
func (c *Client) InitializeWith(caps string) {
	c.T.Helper()
	if err := c.Handshake(context.Background(), caps); err != nil {
		c.T.Fatal(err)
	}
}

// Tool calls a tool in the client's era and returns its structured
// content (Structured) and isError. Anything but a result fails the test.
func (c *Client) Tool(name string, args map[string]any) (map[string]any, bool) {
	c.T.Helper()
	sc, isErr, err := Structured(c.RPC("tools/call", map[string]any{"name": name, "arguments": args}, nil))
	if err != nil {
		c.T.Fatalf("%s: %v", name, err)
	}
	return sc, isErr
}

// RPC sends one request of the client's era, with hdr added to its
// headers, and returns the response, from a JSON or an SSE answer. No
// response fails the test.
func (c *Client) RPC(method string, params map[string]any, hdr map[string]string) map[string]any {
	c.T.Helper()
	body, mirrored := c.Request(c.NextID(), method, params)
	for k, v := range hdr {
		if mirrored == nil {
			mirrored = map[string]string{}
		}
		mirrored[k] = v
	}
	resp := c.Post(context.Background(), string(body), mirrored)
	defer resp.Body.Close()
	var msg map[string]any
	err := Read(resp, func(m map[string]any) bool {
		if _, ok := m["method"]; !ok && msg == nil {
			msg = m
		}
		return true
	})
	if msg == nil {
		c.T.Fatalf("%s: HTTP %d, no response (%v)", method, resp.StatusCode, err)
	}
	return msg
}

// Stream sends one request of the client's era and delivers every message
// of its answer, the response last (Events).
func (c *Client) Stream(method string, params map[string]any) <-chan map[string]any {
	c.T.Helper()
	body, hdr := c.Request(c.NextID(), method, params)
	return Events(c.Post(context.Background(), string(body), hdr))
}

// Respond posts the client's response to a server request (elicitation in
// the legacy era) and returns the HTTP status.
func (c *Client) Respond(id any, result map[string]any) int {
	c.T.Helper()
	resp := c.Post(context.Background(), string(mustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})), nil)
	resp.Body.Close()
	return resp.StatusCode
}

// Answer sends one request of the client's era and returns its response,
// answered as JSON or as the last event of a stream; nil when the answer
// ended without one. Unlike RPC, no response does not fail the test.
func (c *Client) Answer(method string, params map[string]any) map[string]any {
	c.T.Helper()
	body, hdr := c.Request(c.NextID(), method, params)
	var msg map[string]any
	for m := range Events(c.Post(context.Background(), string(body), hdr)) {
		if _, ok := m["method"]; !ok && msg == nil {
			msg = m
		}
	}
	return msg
}

// Logs is a zap Logger that keeps its entries, for tests that read the
// server's log lines.
type Logs struct {
	*observer.ObservedLogs
	Log *zap.Logger
}

// NewLogs keeps the entries at info and above.
func NewLogs() *Logs {
	core, obs := observer.New(zapcore.InfoLevel)
	return &Logs{ObservedLogs: obs, Log: zap.New(core)}
}

// RequestStatus waits up to ten seconds for the request log line of the
// request id (its JSON text) and returns its status.
func (l *Logs) RequestStatus(t testing.TB, id string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range l.FilterMessage("request").All() {
			if e.ContextMap()["id"] == id {
				s, _ := e.ContextMap()["status"].(string)
				return s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line for request %s", id)
	return ""
}
