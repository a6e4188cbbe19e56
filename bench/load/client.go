package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"execd/internal/mcptest"
)

// client is one MCP client: in the legacy era it owns a session; in the
// modern era every request carries the per-request envelope. Requests,
// headers and the reading of answers are internal/mcptest's, which reads
// an answer in place, without a goroutine or a channel per call.
type client struct {
	mc *mcptest.Client
}

// callResult is what one tools/call produced.
type callResult struct {
	status   int            // HTTP status
	sse      bool           // the answer was a text/event-stream
	frames   int            // notifications seen before the answer
	rpcErr   string         // JSON-RPC error message, if any
	isError  bool           // the tool answered isError: true
	result   map[string]any // structuredContent
	response bool           // a response for the request's id arrived
}

func (r callResult) failure() string {
	switch {
	case r.status != http.StatusOK:
		return fmt.Sprintf("http %d", r.status)
	case r.rpcErr != "":
		return "rpc: " + r.rpcErr
	case !r.response:
		return "no response"
	case r.isError:
		s, _ := r.result["status"].(string)
		return "tool error: " + s
	}
	return ""
}

func newClient(hc *http.Client, url, era string) *client {
	return &client{mc: &mcptest.Client{URL: url, HTTP: hc, Legacy: era == "legacy"}}
}

// initialize opens a legacy session (no-op in the modern era).
func (c *client) initialize(ctx context.Context) error {
	if !c.mc.Legacy {
		return nil
	}
	return c.mc.Handshake(ctx, `{}`)
}

// post sends a message whose answer is only a status (notifications).
func (c *client) post(ctx context.Context, body string) (int, error) {
	resp, err := c.mc.Send(ctx, []byte(body), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// toolCall is one tools/call to send.
type toolCall struct {
	tool, code, language, workspace string
	progressToken                   bool
}

// body encodes the call for the client's era and returns it with its id.
func (c *client) body(tc toolCall) (int64, []byte, map[string]string) {
	id := c.mc.NextID()
	args := map[string]any{"code": tc.code, "language": tc.language}
	if tc.workspace != "" {
		args["workspace"] = tc.workspace
	}
	params := map[string]any{"name": tc.tool, "arguments": args}
	if tc.progressToken {
		params["_meta"] = map[string]any{"progressToken": id}
	}
	body, hdr := c.mc.Request(id, "tools/call", params)
	return id, body, hdr
}

// call sends one tools/call and reads its answer, JSON or SSE. onFrame, if
// not nil, sees every notification before the answer.
func (c *client) call(ctx context.Context, tc toolCall, onFrame func(msg map[string]any)) (callResult, error) {
	id, body, hdr := c.body(tc)
	return c.send(ctx, id, body, hdr, onFrame)
}

func (c *client) send(ctx context.Context, id int64, body []byte, hdr map[string]string, onFrame func(map[string]any)) (callResult, error) {
	resp, err := c.mc.Send(ctx, body, hdr)
	if err != nil {
		return callResult{}, err
	}
	defer resp.Body.Close()
	r := callResult{status: resp.StatusCode, sse: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	err = mcptest.Read(resp, func(msg map[string]any) bool { return !r.take(id, msg, onFrame) })
	if r.response {
		_, _ = io.Copy(io.Discard, resp.Body)
		return r, nil
	}
	return r, err
}

// take folds one message into r; it reports whether it was the answer.
func (r *callResult) take(id int64, msg map[string]any, onFrame func(map[string]any)) bool {
	if _, ok := msg["method"]; ok {
		r.frames++
		if onFrame != nil {
			onFrame(msg)
		}
		return false
	}
	if n, ok := msg["id"].(float64); !ok || int64(n) != id {
		return false
	}
	r.response = true
	if e, ok := msg["error"].(map[string]any); ok {
		r.rpcErr, _ = e["message"].(string)
		if r.rpcErr == "" {
			r.rpcErr = "error"
		}
		return true
	}
	res, _ := msg["result"].(map[string]any)
	r.isError, _ = res["isError"].(bool)
	r.result, _ = res["structuredContent"].(map[string]any)
	return true
}

// cancel sends the legacy notifications/cancelled for id.
func (c *client) cancel(ctx context.Context, id int64) (int, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"bench"}}`, id)
	return c.post(ctx, body)
}
