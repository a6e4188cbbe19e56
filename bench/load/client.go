package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

const (
	legacyVersion = "2025-11-25"
	modernVersion = "2026-07-28"
)

// client is one MCP client: in the legacy era it owns a session; in the
// modern era every request carries the per-request envelope.
type client struct {
	hc      *http.Client
	url     string
	era     string
	session string
	nextID  atomic.Int64
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
	return &client{hc: hc, url: url, era: era}
}

// initialize opens a legacy session (no-op in the modern era).
func (c *client) initialize(ctx context.Context) error {
	if c.era != "legacy" {
		return nil
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyVersion +
		`","capabilities":{},"clientInfo":{"name":"execd-bench-load","version":"0.1.0"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("initialize: http %d", resp.StatusCode)
	}
	c.session = resp.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		return errors.New("initialize: no Mcp-Session-Id")
	}
	status, err := c.post(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: http %d", status)
	}
	return nil
}

// post sends a message whose answer is only a status (notifications).
func (c *client) post(ctx context.Context, body string, hdr map[string]string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	c.headers(req, hdr)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (c *client) headers(req *http.Request, hdr map[string]string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.era == "legacy" {
		if c.session != "" {
			req.Header.Set("Mcp-Session-Id", c.session)
			req.Header.Set("MCP-Protocol-Version", legacyVersion)
		}
	} else {
		req.Header.Set("MCP-Protocol-Version", modernVersion)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
}

// toolCall is one tools/call to send.
type toolCall struct {
	tool, code, language, workspace string
	progressToken                   bool
}

// body encodes the call for the client's era and returns it with its id.
func (c *client) body(tc toolCall) (int64, []byte, map[string]string) {
	id := c.nextID.Add(1)
	args := map[string]any{"code": tc.code, "language": tc.language}
	if tc.workspace != "" {
		args["workspace"] = tc.workspace
	}
	meta := map[string]any{}
	if tc.progressToken {
		meta["progressToken"] = id
	}
	var hdr map[string]string
	if c.era == "modern" {
		meta["io.modelcontextprotocol/protocolVersion"] = modernVersion
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
		hdr = map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tc.tool}
		if tc.workspace != "" {
			hdr["Mcp-Param-Workspace"] = tc.workspace
		}
	}
	params := map[string]any{"name": tc.tool, "arguments": args}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return id, b, hdr
}

// call sends one tools/call and reads its answer, JSON or SSE. onFrame, if
// not nil, sees every notification before the answer.
func (c *client) call(ctx context.Context, tc toolCall, onFrame func(msg map[string]any)) (callResult, error) {
	id, body, hdr := c.body(tc)
	return c.send(ctx, id, body, hdr, onFrame)
}

func (c *client) send(ctx context.Context, id int64, body []byte, hdr map[string]string, onFrame func(map[string]any)) (callResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return callResult{}, err
	}
	c.headers(req, hdr)
	resp, err := c.hc.Do(req)
	if err != nil {
		return callResult{}, err
	}
	defer resp.Body.Close()
	r := callResult{status: resp.StatusCode}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		r.sse = true
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("data:")) {
				continue
			}
			var msg map[string]any
			if json.Unmarshal(bytes.TrimSpace(line[len("data:"):]), &msg) != nil {
				continue
			}
			if done := r.take(id, msg, onFrame); done {
				_, _ = io.Copy(io.Discard, resp.Body)
				return r, nil
			}
		}
		return r, sc.Err()
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return r, err
	}
	if len(bytes.TrimSpace(b)) > 0 {
		var msg map[string]any
		if err := json.Unmarshal(b, &msg); err != nil {
			return r, fmt.Errorf("decode answer: %w", err)
		}
		r.take(id, msg, onFrame)
	}
	return r, nil
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
	return c.post(ctx, body, nil)
}
