// Package mcptest is the MCP test client the tests share: posts in either
// era with the headers a conforming client sends, the SSE reader, and the
// helpers that call a tool and read its result. It imports nothing of
// execd, so that every package's tests may use it.
package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// ModernMeta is the _meta member of a modern request that declares no
// client capabilities, to splice into a hand-written body.
const ModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// Client talks to one MCP endpoint over HTTP. With a Session it speaks the
// legacy era (Initialize gives it one); without, the modern era.
type Client struct {
	T       testing.TB
	URL     string // the endpoint, ".../mcp"
	Session string // Mcp-Session-Id; "" in the modern era
	Token   string // a bearer token; "" for none
	// Caps are the clientCapabilities of a modern request; nil means {}.
	Caps map[string]any
}

// TasksCaps are modern clientCapabilities that declare the tasks
// extension.
func TasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
}

// Post sends body with the client's session and token and the given
// headers, accepting JSON and SSE; a transport error fails the test.
func (c *Client) Post(ctx context.Context, body string, hdr map[string]string) *http.Response {
	c.T.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	return resp
}

// Initialize starts a legacy 2025-11-25 session without client
// capabilities and keeps its id.
func (c *Client) Initialize() { c.InitializeWith(`{}`) }

// InitializeWith starts a legacy 2025-11-25 session declaring the client
// capabilities caps (a JSON object) and keeps its id.
func (c *Client) InitializeWith(caps string) {
	c.T.Helper()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`, nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		c.T.Fatalf("initialize: %d", resp.StatusCode)
	}
	c.Session = resp.Header.Get("Mcp-Session-Id")
}

// Events reads the messages of an answer, sending each on the returned
// channel until the stream ends: the SSE data events, or the one message
// of a JSON answer.
func Events(resp *http.Response) <-chan map[string]any {
	ch := make(chan map[string]any, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			var m map[string]any
			if json.NewDecoder(resp.Body).Decode(&m) == nil {
				ch <- m
			}
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					ch <- m
				}
			}
		}
	}()
	return ch
}

// modernHeaders adds the modern era's _meta to params and returns the
// headers a conforming client mirrors from the body.
func (c *Client) modernHeaders(method string, params map[string]any) map[string]string {
	caps := c.Caps
	if caps == nil {
		caps = map[string]any{}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	hdr := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	switch {
	case params["name"] != nil:
		hdr["Mcp-Name"], _ = params["name"].(string)
	case params["uri"] != nil:
		hdr["Mcp-Name"], _ = params["uri"].(string)
	case params["taskId"] != nil:
		hdr["Mcp-Name"], _ = params["taskId"].(string)
	}
	if args, ok := params["arguments"].(map[string]any); ok {
		if ws, ok := args["workspace"].(string); ok {
			hdr["Mcp-Param-Workspace"] = ws
		}
	}
	return hdr
}

// Tool calls a tool in the client's era and returns its structured
// content (or the JSON of its text block, for a result without any) and
// isError. Anything but a result fails the test.
func (c *Client) Tool(name string, args map[string]any) (map[string]any, bool) {
	c.T.Helper()
	params := map[string]any{"name": name, "arguments": args}
	hdr := map[string]string{}
	if c.Session == "" {
		hdr = c.modernHeaders("tools/call", params)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	var msg map[string]any
	for m := range Events(c.Post(context.Background(), string(body), hdr)) {
		if m["id"] != nil {
			msg = m
		}
	}
	res, ok := msg["result"].(map[string]any)
	if !ok {
		c.T.Fatalf("%s: %v", name, msg)
	}
	isErr, _ := res["isError"].(bool)
	if sc, ok := res["structuredContent"].(map[string]any); ok {
		return sc, isErr
	}
	var sc map[string]any
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		c.T.Fatalf("%s: a result without content: %v", name, res)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	if err := json.Unmarshal([]byte(text), &sc); err != nil {
		c.T.Fatalf("%s: text block is not JSON: %q", name, text)
	}
	return sc, isErr
}

// RPC sends one request of the client's era and returns the response,
// which must be a JSON answer.
func (c *Client) RPC(method string, params map[string]any, hdr map[string]string) map[string]any {
	c.T.Helper()
	if hdr == nil {
		hdr = map[string]string{}
	}
	if c.Session == "" {
		for k, v := range c.modernHeaders(method, params) {
			if _, set := hdr[k]; !set {
				hdr[k] = v
			}
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp := c.Post(context.Background(), string(body), hdr)
	defer resp.Body.Close()
	var msg map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		c.T.Fatalf("%s: %v", method, err)
	}
	return msg
}

// Request sends one request of the client's era and returns its response,
// answered as JSON or as the last event of a stream; nil when the answer
// ended without one.
func (c *Client) Request(method string, params map[string]any) map[string]any {
	c.T.Helper()
	hdr := map[string]string{}
	if c.Session == "" {
		hdr = c.modernHeaders(method, params)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	var msg map[string]any
	for m := range Events(c.Post(context.Background(), string(body), hdr)) {
		if m["id"] != nil {
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
