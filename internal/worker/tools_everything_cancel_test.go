package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream"
	"execd/internal/upstream/upstreamtest"
)

// wireRecorder is a reverse proxy in front of an upstream's streamable
// HTTP endpoint that keeps every JSON-RPC message the client posted.
type wireRecorder struct {
	mu   sync.Mutex
	msgs []map[string]json.RawMessage
}

func (rec *wireRecorder) front(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1 // SSE answers pass as they come
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) == nil {
				rec.mu.Lock()
				rec.msgs = append(rec.msgs, m)
				rec.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// cancelOf returns the id of the posted tools/call of tool and whether a
// notifications/cancelled for that id was posted too.
func (rec *wireRecorder) cancelOf(tool string) (id string, cancelled bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range rec.msgs {
		var p struct {
			Name string `json:"name"`
		}
		if string(m["method"]) == `"tools/call"` && json.Unmarshal(m["params"], &p) == nil && p.Name == tool {
			id = string(m["id"])
		}
	}
	for _, m := range rec.msgs {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if string(m["method"]) == `"notifications/cancelled"` && json.Unmarshal(m["params"], &p) == nil && id != "" && string(p.RequestID) == id {
			cancelled = true
		}
	}
	return id, cancelled
}

// A cancel of the run reaches server-everything as notifications/cancelled
// for the call in flight, seen on the wire between execd and the server,
// from both guests; the workspace keeps its state.
func TestToolCallCancelReachesServerEverything(t *testing.T) {
	node, index := upstreamtest.Everything(t)
	rec := &wireRecorder{}
	u := config.Upstream{Name: "everything", Allow: []string{"*"}, MaxCallsPerRun: 10,
		URL:         rec.front(t, upstreamtest.EverythingHTTP(t, node, index)+"/mcp"),
		CallTimeout: config.Duration{Duration: 60 * time.Second}, ConnectTimeout: config.Duration{Duration: 30 * time.Second}}
	h, err := upstream.New([]config.Upstream{u}, config.CodeMode{}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for _, c := range []struct{ lang, code string }{
		{"javascript", `globalThis.kept = 7; await tools.everything.trigger_long_running_operation({duration: 60, steps: 60})`},
		{"python", "from execd import tools\nkept = 7\ntools.everything.trigger_long_running_operation(duration=60, steps=60)"},
	} {
		t.Run(c.lang, func(t *testing.T) {
			rec.mu.Lock()
			rec.msgs = nil
			rec.mu.Unlock()
			w := newLangWorker(t, c.lang)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sink := make(progressSignal, 64)
			done := make(chan Result, 1)
			go func() {
				done <- w.Run(ctx, c.code, RunOptions{Tools: h.NewRun("local", nil), Sink: sink, Timeout: 120 * time.Second})
			}()
			select {
			case <-sink: // the server's first progress: the call is in flight
			case r := <-done:
				t.Fatalf("the run ended first: %s\n%s", describe(r), r.Stderr)
			case <-time.After(60 * time.Second):
				t.Fatal("no progress from the long-running operation within 60s")
			}
			cancel()
			if r := <-done; r.Status != StatusInterrupted || r.Discontinuous() {
				t.Fatalf("= %s, want interrupted with its state", describe(r))
			}
			// The notification is posted as the call is cancelled; allow the
			// client's POST to reach the proxy.
			deadline := time.Now().Add(10 * time.Second)
			id, cancelled := rec.cancelOf("trigger-long-running-operation")
			for !cancelled && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				id, cancelled = rec.cancelOf("trigger-long-running-operation")
			}
			if id == "" || !cancelled {
				t.Fatalf("on the wire: tools/call id %q, notifications/cancelled for it: %v", id, cancelled)
			}
			if got := mustRun(t, w, "kept", StatusOK); value(got) != "7" {
				t.Errorf("state after the cancel: %s", value(got))
			}
		})
	}
}
