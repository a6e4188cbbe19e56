package mcptest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// answer is a server that answers every POST with body as contentType.
func answer(t *testing.T, contentType, body string) *Client {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return &Client{T: t, URL: ts.URL}
}

func TestReadSSE(t *testing.T) {
	// A data field over two lines is one message; a comment, an event name
	// and an id are not data; an event without its blank line is not over.
	c := answer(t, "text/event-stream", ": keep-alive\n\nevent: message\nid: 7\ndata: {\"method\":\"a\",\ndata:\"n\":1}\n\ndata: {\"id\":1,\"result\":{}}\n\ndata: {\"id\":2}")
	resp := c.Post(context.Background(), `{}`, nil)
	defer resp.Body.Close()
	var got []map[string]any
	if err := Read(resp, func(m map[string]any) bool { got = append(got, m); return true }); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{{"method": "a", "n": float64(1)}, {"id": float64(1), "result": map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages %v; want %v", got, want)
	}
}

func TestReadJSONAndErrors(t *testing.T) {
	for _, tc := range []struct {
		ct, body string
		n        int
		bad      bool
	}{
		{"application/json", `{"id":1,"result":{}}`, 1, false},
		{"application/json", ``, 0, false}, // a 202
		{"text/plain", "Forbidden\n", 0, true},
		{"text/event-stream", "data: [1]\n\n", 0, true},
	} {
		resp := answer(t, tc.ct, tc.body).Post(context.Background(), `{}`, nil)
		n := 0
		err := Read(resp, func(map[string]any) bool { n++; return true })
		resp.Body.Close()
		if n != tc.n || errors.Is(err, ErrBadAnswer) != tc.bad {
			t.Errorf("%s %q: %d messages, %v", tc.ct, tc.body, n, err)
		}
	}
}

func TestCallClosesOnAFrame(t *testing.T) {
	c := answer(t, "text/event-stream", "data: {\"method\":\"notifications/progress\"}\n\ndata: {\"id\":5,\"result\":{\"structuredContent\":{\"status\":\"ok\"}}}\n\n")
	if _, err := c.Call(context.Background(), 5, "tools/call", nil, func(map[string]any) bool { return false }); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed on the first frame: %v", err)
	}
	m, err := c.Call(context.Background(), 5, "tools/call", nil, nil)
	if sc, isErr, serr := Structured(m); err != nil || serr != nil || isErr || sc["status"] != "ok" {
		t.Fatalf("%v %v %v %v", m, err, serr, sc)
	}
	if _, err := answer(t, "text/event-stream", "data: {\"method\":\"x\"}\n\n").Call(context.Background(), 1, "ping", nil, nil); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("a stream without a response: %v", err)
	}
}

func TestModernKeepsMetaAndMirrors(t *testing.T) {
	params := map[string]any{"name": "execute_code", "arguments": map[string]any{"workspace": "w"},
		"_meta": map[string]any{"progressToken": "p", "io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}}}}
	hdr := Modern("tools/call", params)
	meta := params["_meta"].(map[string]any)
	if meta["progressToken"] != "p" || meta["io.modelcontextprotocol/protocolVersion"] != ModernVersion ||
		!strings.Contains(mustString(meta["io.modelcontextprotocol/clientCapabilities"]), "elicitation") {
		t.Fatalf("_meta %v", meta)
	}
	if hdr["Mcp-Name"] != "execute_code" || hdr["Mcp-Param-Workspace"] != "w" || hdr["Mcp-Method"] != "tools/call" || hdr["MCP-Protocol-Version"] != ModernVersion {
		t.Fatalf("headers %v", hdr)
	}
}

func mustString(v any) string { return string(mustJSON(v)) }
