// Command fakeupstream is a stdio MCP server for internal/upstream's
// tests, written by hand on JSON-RPC so that it can misbehave: it crashes,
// hangs, writes garbage, floods progress, answers 50 MB, and tells what it
// received (its "received" tool), so that a cancel is seen as it arrived
// on the wire.
//
// FAKE_BANNER=1 prints a line that is not JSON-RPC to stdout first, as
// servers that log to stdout by mistake do.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

var (
	outMu sync.Mutex
	out   = bufio.NewWriterSize(os.Stdout, 1<<20)

	mu        sync.Mutex
	calls     []map[string]any // {id, name} of each tools/call
	cancels   []map[string]any // params of each notifications/cancelled
	cancelled = make(chan struct{}, 1000)
	changed   bool
)

func send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
}

func raw(s string) {
	outMu.Lock()
	defer outMu.Unlock()
	out.WriteString(s)
	out.Flush()
}

func reply(id json.RawMessage, result any) {
	send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

func tools() []any {
	obj := func(props map[string]any, req ...string) map[string]any {
		m := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			m["required"] = req
		}
		return m
	}
	str := map[string]any{"type": "string"}
	num := map[string]any{"type": "number"}
	list := []any{
		map[string]any{"name": "echo", "description": "Echoes its text. Nothing else.", "inputSchema": obj(map[string]any{"text": str}, "text")},
		map[string]any{"name": "add", "description": "Adds two numbers", "inputSchema": obj(map[string]any{"a": num, "b": num}, "a", "b"),
			"outputSchema": obj(map[string]any{"sum": num}, "sum")},
		map[string]any{"name": "create-issue", "description": "Opens an issue", "inputSchema": obj(map[string]any{
			"title": str, "body": str, "labels": map[string]any{"type": "array", "items": str},
			"priority": map[string]any{"enum": []any{"low", "high"}}, "draft": map[string]any{"type": "boolean", "default": false}}, "title")},
		map[string]any{"name": "delete_repo", "description": "Deletes a repository", "inputSchema": obj(map[string]any{"name": str}, "name")},
	}
	for _, n := range []string{"hang", "crash", "garbage", "flood", "big", "change", "image", "fail", "env", "received"} {
		list = append(list, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
	}
	if changed {
		list = append(list, map[string]any{"name": "extra", "inputSchema": map[string]any{"type": "object"}})
	}
	return list
}

func call(id json.RawMessage, p struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Meta      map[string]any `json:"_meta"`
}) {
	mu.Lock()
	calls = append(calls, map[string]any{"id": id, "name": p.Name})
	mu.Unlock()
	args := p.Arguments
	token := p.Meta["progressToken"]
	progress := func(n float64, msg string) {
		if token != nil {
			send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
				"params": map[string]any{"progressToken": token, "progress": n, "total": 100, "message": msg}})
		}
	}
	switch p.Name {
	case "echo":
		s, _ := args["text"].(string)
		reply(id, text(s))
	case "add":
		a, _ := args["a"].(float64)
		b, _ := args["b"].(float64)
		reply(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprint(a + b)}},
			"structuredContent": map[string]any{"sum": a + b}})
	case "hang":
		progress(1, "started")
		// never answers
	case "crash":
		progress(1, "about to exit")
		os.Exit(3)
	case "garbage":
		raw(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[}}` + "\n")
	case "flood":
		n, _ := args["n"].(float64)
		for i := 0; i < int(n); i++ {
			progress(float64(i), "flooding")
		}
		reply(id, text("flooded"))
	case "big":
		n, _ := args["bytes"].(float64)
		reply(id, text(strings.Repeat("x", int(n))))
	case "change":
		mu.Lock()
		changed = true
		mu.Unlock()
		send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		reply(id, text("changed"))
	case "image":
		reply(id, map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png",
			"data": "iVBORw0KGgo="}}})
	case "fail":
		reply(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": "it failed"}}, "isError": true})
	case "env":
		name, _ := args["name"].(string)
		v, ok := os.LookupEnv(name)
		reply(id, map[string]any{"content": []any{}, "structuredContent": map[string]any{"value": v, "set": ok}})
	case "received":
		if args["waitCancel"] == true {
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second):
			}
		}
		mu.Lock()
		res := map[string]any{"calls": calls, "cancels": cancels}
		mu.Unlock()
		reply(id, map[string]any{"content": []any{}, "structuredContent": res})
	default:
		send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32602, "message": "no tool " + p.Name}})
	}
}

func main() {
	if os.Getenv("FAKE_BANNER") == "1" {
		raw("fake upstream listening on stdio\n")
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var m message
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			continue
		}
		switch m.Method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.Params, &p)
			reply(m.ID, map[string]any{"protocolVersion": p.ProtocolVersion,
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo":   map[string]any{"name": "fakeupstream", "version": "1"}})
		case "notifications/initialized":
		case "notifications/cancelled":
			var p map[string]any
			json.Unmarshal(m.Params, &p)
			mu.Lock()
			cancels = append(cancels, p)
			mu.Unlock()
			cancelled <- struct{}{}
		case "ping":
			reply(m.ID, map[string]any{})
		case "tools/list":
			mu.Lock()
			list := tools()
			mu.Unlock()
			reply(m.ID, map[string]any{"tools": list})
		case "tools/call":
			var p struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
				Meta      map[string]any `json:"_meta"`
			}
			json.Unmarshal(m.Params, &p)
			go call(m.ID, p)
		default:
			if len(m.ID) > 0 {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			}
		}
	}
}
