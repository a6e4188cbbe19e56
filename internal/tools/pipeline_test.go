package tools

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"execd/internal/frontend"
	"execd/internal/mcptest"
	"execd/internal/workspace"
)

// queuedExec is an Executor whose every operation waits, like a call
// queued behind a busy workspace, until its context ends, and then
// returns the context's error, as workspace.Manager does. It reports each
// operation that starts waiting.
type queuedExec struct {
	noWorkspaces
	started chan string // "run", "reset", "delete"
}

func (q *queuedExec) wait(ctx context.Context, op string) error {
	q.started <- op
	<-ctx.Done()
	return ctx.Err()
}

func (q *queuedExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	return workspace.Outcome{Workspace: req.Workspace}, q.wait(ctx, "run")
}
func (q *queuedExec) ListPage(string, *workspace.ListFrom, int) ([]workspace.Info, bool) {
	return nil, false
}
func (q *queuedExec) Reset(ctx context.Context, _, _ string, _ bool) error {
	return q.wait(ctx, "reset")
}
func (q *queuedExec) Delete(ctx context.Context, _, _ string) error { return q.wait(ctx, "delete") }

var toolCalls = map[string]string{
	"execute_code":     `{"name":"execute_code","arguments":{"code":"block","language":"javascript","workspace":"w"}%s}`,
	"reset_workspace":  `{"name":"reset_workspace","arguments":{"workspace":"w"}%s}`,
	"delete_workspace": `{"name":"delete_workspace","arguments":{"workspace":"w"}%s}`,
}

var toolOps = map[string]string{"execute_code": "run", "reset_workspace": "reset", "delete_workspace": "delete"}

// A request the client cancelled gets no answer, whatever the tool and
// whatever the transport, also when it is cancelled while it waits in the
// workspace's queue.
func TestCancelledRequestGetsNoAnswer(t *testing.T) {
	for tool := range toolCalls {
		t.Run("legacy-http/"+tool, func(t *testing.T) { cancelLegacyHTTP(t, tool, false) })
		t.Run("legacy-http-batch/"+tool, func(t *testing.T) { cancelLegacyHTTP(t, tool, true) })
		t.Run("modern-http/"+tool, func(t *testing.T) { cancelModernHTTP(t, tool) })
		t.Run("stdio-legacy/"+tool, func(t *testing.T) { cancelStdio(t, tool, false) })
		t.Run("stdio-modern/"+tool, func(t *testing.T) { cancelStdio(t, tool, true) })
	}
}

func cancelLegacyHTTP(t *testing.T, tool string, batch bool) {
	ex := &queuedExec{started: make(chan string, 1)}
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.Logger = lg.Log
	_, ts := newHTTP(t, opts, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	version := "2025-11-25"
	if batch {
		version = frontend.Version20250326
	}
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	resp.Body.Close()
	c.Session = resp.Header.Get("Mcp-Session-Id")
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + fmt.Sprintf(toolCalls[tool], "") + `}`
	if batch {
		body = "[" + body + "]"
	}
	answer := make(chan string, 1)
	go func() {
		r := c.Post(context.Background(), body, nil)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		answer <- fmt.Sprintf("%d %s", r.StatusCode, b)
	}()
	if op := <-ex.started; op != toolOps[tool] {
		t.Fatalf("started %s", op)
	}
	cr := c.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`, nil)
	cr.Body.Close()
	got := <-answer
	if batch {
		if got != "202 " {
			t.Fatalf("the batch of one cancelled call answered %s; want 202 and nothing", got)
		}
	} else if strings.Contains(got, `"id":7`) {
		t.Fatalf("the cancelled call was answered: %s", got)
	}
	if s := lg.RequestStatus(t, "7"); s != "cancelled" {
		t.Fatalf("logged status %s", s)
	}
}

func cancelModernHTTP(t *testing.T, tool string) {
	ex := &queuedExec{started: make(chan string, 1)}
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.Logger = lg.Log
	_, ts := newHTTP(t, opts, ex)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		r, err := http.DefaultClient.Do(modernPost(ctx, ts.URL+"/mcp", tool))
		if err == nil {
			r.Body.Close()
		}
	}()
	<-ex.started
	cancel()
	if s := lg.RequestStatus(t, "7"); s != "cancelled" {
		t.Fatalf("after the stream closed the call ended %s; want cancelled (nothing written)", s)
	}
}

func modernPost(ctx context.Context, url, tool string) *http.Request {
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + fmt.Sprintf(toolCalls[tool], ","+modernMeta) + `}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("Mcp-Param-Workspace", "w")
	return req
}

// stdioConn is a stdio connection to s for a test.
type stdioConn struct {
	T     *testing.T
	in    *io.PipeWriter
	lines chan string
}

func openStdio(t *testing.T, s *frontend.Server) *stdioConn {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = s.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	c := &stdioConn{T: t, in: inW, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { inW.Close() })
	return c
}

func (c *stdioConn) send(line string) {
	c.T.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.T.Fatal(err)
	}
}

func (c *stdioConn) read() string {
	c.T.Helper()
	select {
	case l := <-c.lines:
		return l
	case <-time.After(10 * time.Second):
		c.T.Fatal("no line on stdout")
		return ""
	}
}

func cancelStdio(t *testing.T, tool string, modern bool) {
	ex := &queuedExec{started: make(chan string, 1)}
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.Logger = lg.Log
	c := openStdio(t, newTestServer(opts, ex))
	meta := ""
	if modern {
		meta = "," + modernMeta
		c.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + modernMeta + `}}`)
	} else {
		c.send(`{"jsonrpc":"2.0","id":"d","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	}
	c.read()
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + fmt.Sprintf(toolCalls[tool], meta) + `}`)
	<-ex.started
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7` + meta + `}}`)
	if s := lg.RequestStatus(t, "7"); s != "cancelled" {
		t.Fatalf("logged status %s", s)
	}
	// Whatever the call wrote came before its log line; the next line is
	// the answer to the next request.
	if modern {
		c.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{` + modernMeta + `}}`)
	} else {
		c.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	}
	if l := c.read(); !strings.Contains(l, `"id":8`) {
		t.Fatalf("after the cancel, stdout carried %s", l)
	}
}

// Every request of a batch counts against max_streams_per_principal; the
// ones beyond it are answered inside the batch with the error a single
// request gets.
func TestBatchRequestsCountAgainstTheStreamCap(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 4)}
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.MaxStreamsPerPrincipal = 2
	opts.RequestTimeout = 20 * time.Second // only if the calls are never cancelled
	opts.Logger = lg.Log
	_, ts := newHTTP(t, opts, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	resp.Body.Close()
	c.Session = resp.Header.Get("Mcp-Session-Id")
	var calls []string
	for i := 1; i <= 4; i++ {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript","workspace":"w%d"}}}`, i, i))
	}
	answer := make(chan []map[string]any, 1)
	go func() {
		r := c.Post(context.Background(), "["+strings.Join(calls, ",")+"]", nil)
		defer r.Body.Close()
		var out []map[string]any
		_ = json.NewDecoder(r.Body).Decode(&out)
		answer <- out
	}()
	<-ex.started
	<-ex.started
	// The batch's first two run and hold the cap; the two beyond it are
	// refused before anything is cancelled (a cancel frees a place, and a
	// request admitted after it would run).
	for _, id := range []string{"3", "4"} {
		if s := lg.RequestStatus(t, id); s != "refused" {
			t.Fatalf("request %s beyond the cap logged %s", id, s)
		}
	}
	for id := 1; id <= 4; id++ {
		cr := c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id), nil)
		cr.Body.Close()
	}
	out := <-answer
	if len(out) != 2 {
		t.Fatalf("batch answer %v; want the two requests beyond the cap, refused", out)
	}
	for _, m := range out {
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32000) || !strings.Contains(e["message"].(string), "max_streams_per_principal") {
			t.Fatalf("batch answer %v", out)
		}
	}
	ex.mu.Lock()
	n := len(ex.runs)
	ex.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d runs under a cap of 2", n)
	}
}

// A call inside a batch keeps its session from expiring, as a single call
// does.
func TestBatchCallKeepsItsSessionAlive(t *testing.T) {
	synctest.Test(t, testBatchCallKeepsItsSessionAlive)
}

func testBatchCallKeepsItsSessionAlive(t *testing.T) {
	opts := testOptions()
	opts.SessionIdleTTL = 200 * time.Millisecond
	opts.RequestTimeout = 600 * time.Millisecond
	c := inBubble(t, opts, &fakeExec{})
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	resp.Body.Close()
	c.Session = resp.Header.Get("Mcp-Session-Id")
	r := c.Post(context.Background(), `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}]`, nil)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `"timeout"`) {
		t.Fatalf("the batched call answered %s", b)
	}
	p := c.Post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil)
	p.Body.Close()
	if p.StatusCode != 200 {
		t.Fatalf("the session expired during a batched call: %d", p.StatusCode)
	}
}

// Once shutdown has begun, a stdio request is refused: it would only be
// stopped at the end of the grace.
func TestStdioRequestsRefusedOnceShutdownBegan(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	s := newTestServer(testOptions(), ex)
	c := openStdio(t, s)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.read()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript","workspace":"a"}}}`)
	<-ex.started
	grace, endGrace := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Shutdown(grace); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); !draining(s); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server is not draining 10 s after Shutdown began")
		}
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"6*7","language":"javascript","workspace":"b"}}}`)
	l := c.read()
	if !strings.Contains(l, `"id":3`) || !strings.Contains(l, `"code":-32000`) || !strings.Contains(l, "shutting down") {
		t.Fatalf("a request during shutdown answered %s", l)
	}
	endGrace()
	<-done
	if l := c.read(); !strings.Contains(l, `"id":2`) || !strings.Contains(l, "shutting down") {
		t.Fatalf("the running call answered %s", l)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.runs) != 1 {
		t.Fatalf("runs %v", ex.runs)
	}
}

// A zero Options but for the Executor serves: the endpoint is /mcp, bodies
// up to 4 MiB, no cap, no auth.
func TestZeroOptionsServe(t *testing.T) {
	s, err := frontend.New(frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(s, Options{Executor: &fakeExec{}}); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	c := &client{T: t, URL: ts.URL + "/mcp"}
	r := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"6*7","language":"javascript"},`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Accept": "application/json"})
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !strings.Contains(string(b), `\"result\":\"42\"`) || !strings.Contains(string(b), `"version":"dev"`) {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	var out strings.Builder
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	if err := s.ServeStdio(context.Background(), in, &out); err != nil || out.String() != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
		t.Fatalf("stdio: %q %v", out.String(), err)
	}
}

// Requests with the same id by value are one request: a cancel naming 100
// reaches the call sent as 1E2, and a second 100 is refused while it runs.
func TestIDsMatchByValue(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.Logger = lg.Log
	c := openStdio(t, newTestServer(opts, ex))
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.read()
	c.send(`{"jsonrpc":"2.0","id":1E2,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`)
	select {
	case <-ex.started:
	case l := <-c.lines:
		t.Fatalf("the call with id 1E2 did not run: %s", l)
	}
	c.send(`{"jsonrpc":"2.0","id":100,"method":"ping"}`)
	if l := c.read(); !strings.Contains(l, `"id":100`) || !strings.Contains(l, "already in use") {
		t.Fatalf("a second request 100 while 1E2 runs: %s", l)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":100}}`)
	if s := lg.RequestStatus(t, "1E2"); s != "cancelled" {
		t.Fatalf("cancel of 100 left 1E2 %s", s)
	}
}

// draining reports that s has begun to shut down: /healthz says so.
func draining(s *frontend.Server) bool {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code == http.StatusServiceUnavailable
}
