package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The protocol revisions the client speaks: the legacy era's newest
// (initialize, sessions) and the modern era (a _meta envelope on every
// request).
const (
	LegacyVersion = "2025-11-25"
	ModernVersion = "2026-07-28"
)

// ModernMeta is the _meta member of a modern request that declares no
// client capabilities, to splice into a hand-written body.
const ModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + ModernVersion + `","io.modelcontextprotocol/clientCapabilities":{}}`

// Modern adds the modern era's envelope to params — the protocol version
// and, unless params already declare some, no client capabilities; other
// _meta members such as a progressToken are kept — and returns the headers
// a conforming client mirrors from the body: MCP-Protocol-Version,
// Mcp-Method, Mcp-Name (a tool's name or a resource's uri) and
// Mcp-Param-Workspace.
func Modern(method string, params map[string]any) map[string]string {
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = ModernVersion
	if meta["io.modelcontextprotocol/clientCapabilities"] == nil {
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
	}
	params["_meta"] = meta
	hdr := map[string]string{"MCP-Protocol-Version": ModernVersion, "Mcp-Method": method}
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

// ErrBadAnswer is matched (errors.Is) by Read's error for an answer that is
// not JSON-RPC: a body or an SSE event that is not a JSON object.
var ErrBadAnswer = errors.New("mcptest: not a JSON-RPC answer")

// maxEvent bounds one SSE line: the output a run may print, base64 images
// and the JSON around them.
const maxEvent = 32 << 20

// Read reads the messages of an answer in order and gives each to each: the
// data of every SSE event, or the one message of a JSON answer (none for an
// empty body, as a 202 has). It stops when each returns false (the caller
// then closes the body, as a client that goes away does) or the answer
// ends. It neither closes the body nor starts a goroutine, so that a load
// generator may use it on its hot path.
func Read(resp *http.Response, each func(msg map[string]any) bool) error {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return fmt.Errorf("%w: HTTP %d: %.300q", ErrBadAnswer, resp.StatusCode, b)
		}
		each(m)
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, maxEvent)
	var data []byte
	lines := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // the end of an event
			if lines > 0 {
				var m map[string]any
				if json.Unmarshal(data, &m) != nil {
					return fmt.Errorf("%w: SSE data %.300q", ErrBadAnswer, data)
				}
				if !each(m) {
					return nil
				}
			}
			data, lines = data[:0], 0
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			lines++
		}
	}
	return sc.Err()
}

// Events reads the messages of an answer, sending each on the returned
// channel until the answer ends, and closes the body: Read on a goroutine
// of its own, for tests that wait on several things at once.
func Events(resp *http.Response) <-chan map[string]any {
	ch := make(chan map[string]any, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		_ = Read(resp, func(m map[string]any) bool { ch <- m; return true })
	}()
	return ch
}

// Structured returns a tool result's structuredContent and isError. A
// result without one (a result with images has none) gives the JSON of its
// first text block instead. msg that is not a tool result is an error.
func Structured(msg map[string]any) (map[string]any, bool, error) {
	if e, ok := msg["error"]; ok {
		return nil, false, fmt.Errorf("a JSON-RPC error: %v", e)
	}
	res, ok := msg["result"].(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("not a result: %.300v", msg)
	}
	isErr, _ := res["isError"].(bool)
	if sc, ok := res["structuredContent"].(map[string]any); ok {
		return sc, isErr, nil
	}
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return nil, isErr, fmt.Errorf("a result without content: %.300v", res)
	}
	block, _ := content[0].(map[string]any)
	text, _ := block["text"].(string)
	var sc map[string]any
	if err := json.Unmarshal([]byte(text), &sc); err != nil {
		return nil, isErr, fmt.Errorf("the text block is not JSON: %.300q", text)
	}
	return sc, isErr, nil
}
