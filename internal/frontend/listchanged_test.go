package frontend

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// With Options.ToolsListChanged, legacy initialize declares
// tools.listChanged (discover does not: the modern era has no push), and
// a change reaches a session's GET stream as
// notifications/tools/list_changed. Without it, neither.
func TestToolsListChangedOnTheSessionStream(t *testing.T) {
	for _, on := range []bool{true, false} {
		opts := testOptions()
		opts.ToolsListChanged = on
		s, ts := newHTTP(t, opts)
		c := &client{T: t, URL: ts.URL + "/mcp"}
		resp0 := c.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+mcptest.LegacyVersion+
			`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
		var init map[string]any
		_ = mcptest.Read(resp0, func(m map[string]any) bool { init = m; return false })
		resp0.Body.Close()
		if !strings.Contains(string(mustJSON(init)), `"tools":{"listChanged":`+map[bool]string{true: "true", false: "false"}[on]+`}`) {
			t.Errorf("ToolsListChanged %v: initialize: %v", on, init)
		}
		modern := &client{T: t, URL: ts.URL + "/mcp"}
		if disc := modern.RPC("server/discover", map[string]any{}, nil); !strings.Contains(string(mustJSON(disc)), `"tools":{"listChanged":false}`) {
			t.Errorf("discover: %v", disc)
		}
		c.Initialize()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.Session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		events := mcptest.Events(resp)
		// The stream is the session's by the time its headers arrive.
		s.NotifyToolsChanged()
		if on {
			got := ""
			for m := range events {
				got, _ = m["method"].(string)
				break
			}
			if got != "notifications/tools/list_changed" {
				t.Errorf("the GET stream carried %q", got)
			}
		} else {
			// Nothing reaches the stream in the time a notification would.
			time.AfterFunc(200*time.Millisecond, cancel)
			for m := range events {
				t.Errorf("without ToolsListChanged the GET stream carried %v", m)
			}
		}
		cancel()
		resp.Body.Close()
	}
}

// A stdio client that has initialized hears the change on stdout.
func TestToolsListChangedOnStdio(t *testing.T) {
	opts := testOptions()
	opts.ToolsListChanged = true
	s := newTestServer(opts)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW) }()
	lines := bufio.NewScanner(outR)
	read := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", lines.Bytes(), err)
		}
		return m
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	if m := read(); !strings.Contains(string(mustJSON(m)), `"tools":{"listChanged":true}`) {
		t.Errorf("initialize: %v", m)
	}
	s.NotifyToolsChanged()
	if m := read(); m["method"] != "notifications/tools/list_changed" {
		t.Errorf("stdout carried %v", m)
	}
	inW.Close()
	<-done
	outW.Close()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
