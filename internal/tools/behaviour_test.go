package tools

import (
	"bufio"
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
	"testing/synctest"
	"time"

	"execd/internal/frontend"
	"execd/internal/mcptest"
	"execd/internal/workspace"
)

const modernMeta = mcptest.ModernMeta

// client is the shared MCP test client.
type client = mcptest.Client

func newHTTP(t *testing.T, cfg testConfig, ex workspace.Executor) (*frontend.Server, *httptest.Server) {
	t.Helper()
	s := newTestServer(cfg, ex)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// inBubble is newHTTP for a testing/synctest bubble: a client of the engine
// served in process (mcptest.InProcess), which is shut down at the end of
// the test, so that the bubble's goroutines end.
func inBubble(t *testing.T, cfg testConfig, ex workspace.Executor) *client {
	t.Helper()
	s := newTestServer(cfg, ex)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return &client{T: t, URL: "http://127.0.0.1/mcp", HTTP: mcptest.InProcess(s.Handler())}
}

func TestLegacyCancelStopsRunAndSendsNothing(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	_, ts := newHTTP(t, testOptions(), ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"},"_meta":{"progressToken":"tok"}}}`, nil)
	ev := mcptest.Events(resp)
	<-ex.started
	// The cancel is its own POST, answered at once although the workspace is busy.
	cr := c.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`, nil)
	cr.Body.Close()
	if cr.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", cr.StatusCode)
	}
	for m := range ev {
		if m["method"] == "notifications/progress" {
			continue
		}
		t.Fatalf("after a cancel the stream carried %v", m)
	}
}

func TestLegacyDuplicateInflightID(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	_, ts := newHTTP(t, testOptions(), ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := c.Post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	defer resp.Body.Close()
	<-ex.started
	dup := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "application/json"})
	b, _ := io.ReadAll(dup.Body)
	dup.Body.Close()
	if !strings.Contains(string(b), `"code":-32600`) || !strings.Contains(string(b), "already in use") {
		t.Fatalf("reused in-flight id answered %s", b)
	}
	c.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil).Body.Close()
}

// Deleting a legacy session stops the calls running in it (they were the
// session's), and sends nothing more on their streams.
func TestLegacySessionDeleteStopsItsRuns(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	done := make(chan struct{})
	s, ts := newHTTP(t, testOptions(), &notifyingExec{fakeExec: ex, done: done})
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	ev := mcptest.Events(resp)
	<-ex.started
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", c.Session)
	dr, err := http.DefaultClient.Do(req)
	if err != nil || dr.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", dr, err)
	}
	dr.Body.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		ended, end := context.WithCancel(context.Background())
		end()
		s.Shutdown(ended) // stops the run, so that the server can close
		t.Fatal("deleting the session did not stop its run")
	}
	for m := range ev {
		t.Fatalf("after the session ended the stream carried %v", m)
	}
}

// A legacy session's running call that outlasts the shutdown grace is
// stopped and answered that execd is shutting down.
func TestLegacySessionRunStoppedByShutdown(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	s, ts := newHTTP(t, testOptions(), ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	<-ex.started
	grace, endGrace := context.WithCancel(context.Background())
	endGrace()
	s.Shutdown(grace)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":7`) || !strings.Contains(string(b), "shutting down") {
		t.Fatalf("the session's call answered %s", b)
	}
}

func TestModernStreamCloseCancelsRun(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	done := make(chan struct{})
	wrapped := &notifyingExec{fakeExec: ex, done: done}
	_, ts := newHTTP(t, testOptions(), wrapped)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"},`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code"})
	<-ex.started
	cancel()
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the modern stream did not cancel the run")
	}
}

// notifyingExec closes done when a run returns, and keeps how it ended.
type notifyingExec struct {
	*fakeExec
	done   chan struct{}
	once   sync.Once
	status workspace.Status // of the first run, once done is closed
	cause  error            // its context's cause
}

func (n *notifyingExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	out, err := n.fakeExec.Run(ctx, req)
	n.once.Do(func() {
		n.status, n.cause = out.Result.Status, context.Cause(ctx)
		close(n.done)
	})
	return out, err
}

func TestLegacyStreamCloseIsNotACancel(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	done := make(chan struct{})
	wrapped := &notifyingExec{fakeExec: ex, done: done}
	cfg := testOptions()
	cfg.RequestTimeout = 300 * time.Millisecond
	_, ts := newHTTP(t, cfg, wrapped)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.Post(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	<-ex.started
	cancel()
	resp.Body.Close()
	// The run is not cancelled by the close: it goes on to its end, which
	// for this endless code is execd's own deadline.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run never ended")
	}
	if wrapped.status != workspace.StatusTimeout || wrapped.cause != nil {
		t.Fatalf("the run ended %s (context cause %v); want it to reach its timeout, uncancelled", wrapped.status, wrapped.cause)
	}
	if n := len(ex.runs); n != 1 {
		t.Fatalf("runs: %d", n)
	}
}

func TestProgressStrictlyIncreasingBeforeResult(t *testing.T) {
	synctest.Test(t, testProgressStrictlyIncreasingBeforeResult)
}

func testProgressStrictlyIncreasingBeforeResult(t *testing.T) {
	c := inBubble(t, testOptions(), &fakeExec{})
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"progress 3","language":"javascript"},"_meta":{"progressToken":9}}}`, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", resp.Header)
	}
	var last float64
	frames, gotResult := 0, false
	for m := range mcptest.Events(resp) {
		if gotResult {
			t.Fatalf("message after the result: %v", m)
		}
		if m["method"] == "notifications/progress" {
			p := m["params"].(map[string]any)
			if p["progressToken"] != float64(9) {
				t.Fatalf("token %v", p["progressToken"])
			}
			if v := p["progress"].(float64); v <= last {
				t.Fatalf("progress %v after %v", v, last)
			} else {
				last = v
			}
			frames++
			continue
		}
		if m["id"] != float64(9) || m["result"] == nil {
			t.Fatalf("unexpected %v", m)
		}
		gotResult = true
	}
	if !gotResult || frames < 3 {
		t.Fatalf("result %v, %d progress frames (want start + 3 steps coalesced to ≥3)", gotResult, frames)
	}
}

func TestShutdownAnswersRunningCalls(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	s, ts := newHTTP(t, testOptions(), ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	ev := mcptest.Events(resp)
	<-ex.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.Shutdown(ctx)
	var res map[string]any
	for m := range ev {
		if m["id"] == float64(5) {
			res = m["result"].(map[string]any)
		}
	}
	if res == nil || res["isError"] != true {
		t.Fatalf("no isError result after shutdown: %v", res)
	}
	sc := res["structuredContent"].(map[string]any)
	if !strings.Contains(sc["error"].(string), "shutting down") || sc["status"] != "interrupted" {
		t.Fatalf("structuredContent %v", sc)
	}
}

func TestAuthAndPrincipalIsolation(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("# two principals\nalice aaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbb\n"), 0o600)
	cfg := testOptions()
	cfg.AuthTokensFile = file
	_, ts := newHTTP(t, cfg, &fakeExec{})
	anon := &client{T: t, URL: ts.URL + "/mcp"}
	r := anon.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", r.StatusCode)
	}
	bad := &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaab"}
	r = bad.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", r.StatusCode)
	}
	if h, _ := http.Get(ts.URL + "/healthz"); h.StatusCode != 200 {
		t.Fatalf("healthz needs no token: %d", h.StatusCode)
	}
	alice := &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaaa"}
	alice.Initialize()
	// Bob cannot use, cancel into, or delete Alice's session.
	bob := &client{T: t, URL: ts.URL + "/mcp", Token: "bbbbbbbbbbbbbbbbbbbb", Session: alice.Session}
	r = bob.Post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("bob on alice's session: %d", r.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodDelete, ts.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer bbbbbbbbbbbbbbbbbbbb")
	req.Header.Set("Mcp-Session-Id", alice.Session)
	dr, _ := http.DefaultClient.Do(req)
	if dr.StatusCode != http.StatusNotFound {
		t.Fatalf("bob deleting alice's session: %d", dr.StatusCode)
	}
	r = alice.Post(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("alice's session broken by bob: %d", r.StatusCode)
	}
}

func TestBodyTooLarge(t *testing.T) {
	cfg := testOptions()
	cfg.MaxBodyBytes = 2048
	_, ts := newHTTP(t, cfg, &fakeExec{})
	c := &client{T: t, URL: ts.URL + "/mcp"}
	r := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`+strings.Repeat("a", 4096)+`"}}`, nil)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "-32000") {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
}

func TestStdioCancelSendsNothing(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	s := newTestServer(testOptions(), ex)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{`+modernMeta+`}}`+"\n")
	<-lines
	io.WriteString(inW, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript","workspace":"w"},`+modernMeta+`}}`+"\n")
	<-ex.started
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"SdkError: Request timed out",`+modernMeta+`}}`+"\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{`+modernMeta+`}}`+"\n")
	select {
	case l := <-lines:
		if !strings.Contains(l, `"id":5`) {
			t.Fatalf("after the cancel, stdout carried %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to tools/list")
	}
	inW.Close()
	for l := range lines {
		t.Fatalf("after EOF: %s", l)
	}
}

func TestStreamCapPerPrincipal(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 2)}
	cfg := testOptions()
	cfg.MaxStreamsPerPrincipal = 2
	_, ts := newHTTP(t, cfg, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 1; i <= 2; i++ {
		r := c.Post(ctx, `{"jsonrpc":"2.0","id":`+string(rune('0'+i))+`,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
		defer r.Body.Close()
		<-ex.started
	}
	r := c.Post(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "max_streams_per_principal") {
		t.Fatalf("third open request: %d %s", r.StatusCode, b)
	}
	for _, id := range []string{"1", "2"} {
		c.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`, nil).Body.Close()
	}
}

// slowReader sends its first byte, then stalls until closed.
type slowReader struct {
	sent bool
	stop chan struct{}
}

func (s *slowReader) Read(p []byte) (int, error) {
	if !s.sent {
		s.sent = true
		p[0] = '{'
		return 1, nil
	}
	<-s.stop
	return 0, io.EOF
}

func TestSlowBodyIsCutOff(t *testing.T) {
	cfg := testOptions()
	cfg.ReadTimeout = 200 * time.Millisecond
	_, ts := newHTTP(t, cfg, &fakeExec{})
	body := &slowReader{stop: make(chan struct{})}
	defer close(body.stop)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.ContentLength = 1000
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- nil
			return
		}
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp != nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("slow body answered %d", resp.StatusCode)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stalled body held the request open")
	}
}

// A legacy session is not idle while a call runs: its idle time starts when
// the last call ends. In a synctest bubble, with the engine served in
// process, the 600 ms call and the idle TTL pass in fake time.
func TestSessionNotIdleWhileCallRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testOptions()
		cfg.SessionIdleTTL = 200 * time.Millisecond
		cfg.RequestTimeout = 600 * time.Millisecond
		c := inBubble(t, cfg, &fakeExec{})
		c.Initialize()
		ping := func() int {
			body, hdr := c.Request(c.NextID(), "ping", nil)
			p := c.Post(context.Background(), string(body), hdr)
			p.Body.Close()
			return p.StatusCode
		}
		start := time.Now()
		r := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
		for range mcptest.Events(r) {
		}
		if took := time.Since(start); took != cfg.RequestTimeout {
			t.Fatalf("the call took %v; want its timeout %v", took, cfg.RequestTimeout)
		}
		// The call lasted three idle TTLs; the session is still there, and
		// is idle from the end of each request.
		if code := ping(); code != http.StatusOK {
			t.Fatalf("session expired during a call: %d", code)
		}
		time.Sleep(cfg.SessionIdleTTL - time.Millisecond)
		if code := ping(); code != http.StatusOK {
			t.Fatalf("session expired within its idle TTL: %d", code)
		}
		time.Sleep(cfg.SessionIdleTTL + time.Millisecond)
		if code := ping(); code != http.StatusNotFound {
			t.Fatalf("idle session not expired: %d", code)
		}
	})
}

func TestStdioAnswersRequestsPipedBeforeEOF(t *testing.T) {
	s := newTestServer(testOptions(), &fakeExec{})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"6*7","language":"javascript"}}}
`)
	var out strings.Builder
	if err := s.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"id":2,"result"`) || !strings.Contains(out.String(), `\"result\":\"42\"`) {
		t.Fatalf("piped call unanswered:\n%s", out.String())
	}
}

func TestStdioBatchIn20250326(t *testing.T) {
	s := newTestServer(testOptions(), &fakeExec{})
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}
[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"6*7","language":"javascript"}}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":4,"method":"nope"}]
`)
	var out strings.Builder
	if err := s.ServeStdio(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want the initialize answer and one batch line:\n%s", out.String())
	}
	var batch []map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &batch); err != nil || len(batch) != 3 {
		t.Fatalf("batch answer %s", lines[1])
	}
	got := map[float64]bool{}
	for _, m := range batch {
		got[m["id"].(float64)] = true
	}
	if !got[2] || !got[3] || !got[4] || !strings.Contains(lines[1], `\"result\":\"42\"`) || !strings.Contains(lines[1], `-32601`) {
		t.Fatalf("batch answer %s", lines[1])
	}
}
