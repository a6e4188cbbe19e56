package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream/upstreamtest"
)

// The reference server @modelcontextprotocol/server-everything as a real
// upstream, over stdio and over streamable HTTP, located and started by
// upstreamtest; test/e2e/run.sh's upstream step runs these tests with
// E2E_NODE and E2E_SERVER_EVERYTHING.

func everythingUpstream(name string, edit func(*config.Upstream)) config.Upstream {
	u := config.Upstream{Name: name, Allow: []string{"*"}, MaxCallsPerRun: 100,
		CallTimeout: config.Duration{Duration: 30 * time.Second}, ConnectTimeout: config.Duration{Duration: 30 * time.Second}}
	edit(&u)
	return u
}

// callEverything calls the tools every client of it should be able to:
// echo, get-sum, a long-running operation with progress, an image,
// structured content.
func callEverything(t *testing.T, h *Hub) {
	ctx := context.Background()
	tools, err := h.Tools(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ti := range tools {
		names[ti.Name] = true
	}
	for _, n := range []string{"echo", "get-sum", "trigger-long-running-operation", "get-tiny-image", "get-structured-content"} {
		if !names[n] {
			t.Fatalf("server-everything lists no %s: %v", n, names)
		}
	}
	run := h.NewRun("local", nil)
	if res := mustCall(t, run, "everything", "echo", map[string]any{"message": "hello"}); !strings.Contains(res.Text, "hello") {
		t.Errorf("echo: %+v", res)
	}
	if res := mustCall(t, run, "everything", "get_sum", map[string]any{"a": 2, "b": 40}); !strings.Contains(res.Text, "42") {
		t.Errorf("get-sum: %+v", res)
	}
	var mu sync.Mutex
	var steps []float64
	res, err := run.Call(ctx, "everything", "trigger-long-running-operation", args(t, map[string]any{"duration": 0.5, "steps": 5}),
		func(done, total float64, _ string) {
			mu.Lock()
			defer mu.Unlock()
			if total != 5 {
				t.Errorf("progress %v of %v", done, total)
			}
			steps = append(steps, done)
		})
	if err != nil || !strings.Contains(res.Text, "completed") {
		t.Fatalf("long-running operation: %+v, %v", res, err)
	}
	mu.Lock()
	if len(steps) == 0 {
		t.Error("no progress reached the callback")
	}
	mu.Unlock()
	res = mustCall(t, run, "everything", "get-tiny-image", nil)
	if len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || !bytes.HasPrefix(res.Images[0].Data, []byte("\x89PNG")) {
		t.Errorf("get-tiny-image: %d images %+v", len(res.Images), res.Images)
	}
	res = mustCall(t, run, "everything", "get-structured-content", map[string]any{"location": "Chicago"})
	var weather struct {
		Temperature *float64 `json:"temperature"`
	}
	if json.Unmarshal(res.StructuredContent, &weather) != nil || weather.Temperature == nil {
		t.Errorf("get-structured-content: %s", res.StructuredContent)
	}
	for _, lang := range []string{"javascript", "python"} {
		if sig := h.Signatures("local", lang, 0); !strings.Contains(sig, "tools.everything.get_sum(") {
			t.Errorf("%s signatures:\n%s", lang, sig)
		}
	}
}

func TestEverythingStdio(t *testing.T) {
	node, index := upstreamtest.Everything(t)
	h := newHub(t, Options{}, everythingUpstream("everything", func(u *config.Upstream) { u.Command = []string{node, index, "stdio"} }))
	callEverything(t, h)
}

func TestEverythingHTTP(t *testing.T) {
	node, index := upstreamtest.Everything(t)
	base := upstreamtest.EverythingHTTP(t, node, index)
	// A proxy in between records what reaches the server.
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	w := &wire{cancel: make(chan json.RawMessage, 10)}
	srv := httptest.NewServer(w.wrap(proxy))
	t.Cleanup(srv.Close) // after the Hub's Close (cleanups run last first), which ends its streams
	h := newHub(t, Options{}, everythingUpstream("everything", func(u *config.Upstream) { u.URL = srv.URL + "/mcp" }))
	callEverything(t, h)

	// A cancel reaches it as notifications/cancelled for the call's id.
	ctx, cancel := context.WithCancel(context.Background())
	_, err := h.NewRun("local", nil).Call(ctx, "everything", "trigger-long-running-operation",
		args(t, map[string]any{"duration": 30, "steps": 30}), func(float64, float64, string) { cancel() })
	wantCode(t, err, CodeCancelled)
	var p struct {
		RequestID any `json:"requestId"`
	}
	select {
	case raw := <-w.cancel:
		json.Unmarshal(raw, &p)
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/cancelled reached server-everything")
	}
	w.mu.Lock()
	var want any
	for _, m := range w.msgs {
		if pm, _ := m["params"].(map[string]any); m["method"] == "tools/call" && pm["name"] == "trigger-long-running-operation" {
			want = m["id"] // the last such call is the cancelled one
		}
	}
	w.mu.Unlock()
	if p.RequestID != want {
		t.Errorf("notifications/cancelled for %v; the call was %v", p.RequestID, want)
	}
}
