package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"execd/internal/config"
)

// wire records the JSON-RPC messages POSTed to an HTTP upstream, as they
// arrived.
type wire struct {
	mu   sync.Mutex
	msgs []map[string]any
	hdr  []http.Header
	// cancel is signalled for each notifications/cancelled.
	cancel chan json.RawMessage
}

func (w *wire) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			w.mu.Lock()
			w.msgs = append(w.msgs, m)
			w.hdr = append(w.hdr, r.Header.Clone())
			w.mu.Unlock()
			if m["method"] == "notifications/cancelled" {
				p, _ := json.Marshal(m["params"])
				w.cancel <- p
			}
		}
		next.ServeHTTP(rw, r)
	})
}

// idOf is the id of the first tools/call of tool that reached the wire.
func (w *wire) idOf(tool string) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.msgs {
		if p, _ := m["params"].(map[string]any); m["method"] == "tools/call" && p["name"] == tool {
			return m["id"]
		}
	}
	return nil
}

func httpUpstream(t *testing.T, jsonResponse bool) (*httptest.Server, *wire) {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says what headers it got"}, func(_ context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		h := req.Extra.Header
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: h.Get("Authorization") + " | " + h.Get("X-Team")}}}, nil, nil
	})
	type size struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in size) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "waiting"})
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	w := &wire{cancel: make(chan json.RawMessage, 10)}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	srv := httptest.NewServer(w.wrap(h))
	t.Cleanup(srv.Close)
	return srv, w
}

func TestHTTPUpstream(t *testing.T) {
	srv, w := httpUpstream(t, false)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHub(t, Options{MaxResultBytes: 64 << 10}, config.Upstream{Name: "web", URL: srv.URL, Headers: map[string]string{"X-Team": "data"},
		Bearer: &config.UpstreamSecret{ValueFile: tokenFile}, Allow: []string{"*"}, MaxCallsPerRun: 10,
		CallTimeout: config.Duration{Duration: 10e9}, ConnectTimeout: config.Duration{Duration: 10e9}})
	run := h.NewRun("local", nil)
	// The upstream gets the headers and the bearer; the code gets the
	// bearer's value only as [secret].
	if res := mustCall(t, run, "web", "whoami", nil); res.Text != "Bearer [secret] | data" {
		t.Errorf("whoami: %q", res.Text)
	}
	w.mu.Lock()
	for _, hd := range w.hdr {
		if hd.Get("Authorization") != "Bearer s3cret-token-value" || hd.Get("X-Team") != "data" {
			t.Errorf("a request without the headers: %v", hd)
		}
	}
	w.mu.Unlock()

	_, err := run.Call(context.Background(), "web", "big", args(t, map[string]any{"bytes": 1 << 20}), nil)
	wantCode(t, err, CodeTooLarge, "tools.web.big", "more than the 65536")

	ctx, cancel := context.WithCancel(context.Background())
	_, err = run.Call(ctx, "web", "wait", nil, func(float64, float64, string) { cancel() })
	wantCode(t, err, CodeCancelled)
	var p struct {
		RequestID any `json:"requestId"`
	}
	json.Unmarshal(<-w.cancel, &p)
	if want := w.idOf("wait"); p.RequestID != want {
		t.Errorf("notifications/cancelled for %v, the call was %v", p.RequestID, want)
	}
	mustCall(t, run, "web", "whoami", nil)
	if st := h.Status()[0]; st.Transport != "http" || st.State != StateUp || st.Connects != 1 {
		t.Errorf("status: %+v", st)
	}
}

// An application/json answer too large is dropped unread too.
func TestHTTPJSONAnswerTooLarge(t *testing.T) {
	srv, _ := httpUpstream(t, true)
	h := newHub(t, Options{MaxResultBytes: 64 << 10}, config.Upstream{Name: "web", URL: srv.URL, Allow: []string{"*"}, MaxCallsPerRun: 10,
		CallTimeout: config.Duration{Duration: 10e9}, ConnectTimeout: config.Duration{Duration: 10e9}})
	run := h.NewRun("local", nil)
	_, err := run.Call(context.Background(), "web", "big", args(t, map[string]any{"bytes": 1 << 20}), nil)
	wantCode(t, err, CodeTooLarge, "tools.web.big")
	if res := mustCall(t, run, "web", "big", map[string]any{"bytes": 10}); res.Text != "xxxxxxxxxx" {
		t.Errorf("after: %q", res.Text)
	}
}

func TestBearerErrorsNameTheKey(t *testing.T) {
	up := func(b *config.UpstreamSecret) []config.Upstream {
		return []config.Upstream{{Name: "web", URL: "http://127.0.0.1:1/mcp", Bearer: b, Allow: []string{"*"}}}
	}
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"SHORT": "abc", "SPACE": "abc def ghi"}[k]
		return v, ok
	}
	for _, tc := range []struct {
		b    config.UpstreamSecret
		want string
	}{
		{config.UpstreamSecret{ValueFile: "/nonexistent/token"}, "upstream[0] (web).bearer.value_file"},
		{config.UpstreamSecret{Env: "UNSET"}, "upstream[0] (web).bearer.env: the environment variable UNSET is not set"},
		{config.UpstreamSecret{Env: "SHORT"}, "upstream[0] (web).bearer: the value has 3 bytes"},
		{config.UpstreamSecret{Env: "SPACE"}, "upstream[0] (web).bearer: the value holds a space"},
	} {
		_, err := New(up(&tc.b), config.CodeMode{}, Options{LookupEnv: env})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.b, err, tc.want)
		}
	}
}
