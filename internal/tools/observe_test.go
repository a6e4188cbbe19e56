package tools

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/frontend"
	"execd/internal/workspace"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu   sync.Mutex
	ends []string // "method tool outcome cancel"
	info []frontend.RequestInfo
}

type ctxKey struct{}

func (r *recorder) RequestStart(ctx context.Context, ri frontend.RequestInfo) (context.Context, func(frontend.RequestEnd)) {
	r.mu.Lock()
	r.info = append(r.info, ri)
	r.mu.Unlock()
	return context.WithValue(ctx, ctxKey{}, ri.ID), func(e frontend.RequestEnd) {
		r.mu.Lock()
		r.ends = append(r.ends, strings.Join(strings.Fields(ri.Method+" "+ri.Tool+" "+e.Outcome+" "+e.Cancel), " "))
		r.mu.Unlock()
	}
}

func (r *recorder) waitEnds(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		if len(r.ends) >= n {
			out := append([]string(nil), r.ends...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
	}
	t.Fatalf("want %d request ends, have %v", n, r.ends)
	return nil
}

// ctxExec records the context value the Observer put in the call's context.
type ctxExec struct {
	fakeExec
	seen chan any
}

func (c *ctxExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	c.seen <- ctx.Value(ctxKey{})
	return c.fakeExec.Run(ctx, req)
}

func TestObserverSeesEveryRequestAndItsEnd(t *testing.T) {
	rec := &recorder{}
	opts := testOptions()
	opts.Observer = rec
	ex := &ctxExec{seen: make(chan any, 8)}
	_, ts := newHTTP(t, opts, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"6*7","language":"javascript"},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`,
		map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"})
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if v := <-ex.seen; v != "1" {
		t.Errorf("the executor's context lacks the Observer's value: %v", v)
	}
	resp = c.Post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"no/such","params":{}}`, nil)
	resp.Body.Close()
	resp = c.Post(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"made_up","arguments":{}}}`, nil)
	resp.Body.Close()
	ends := rec.waitEnds(t, 4)
	want := []string{"initialize ok", "tools/call execute_code ok", "other refused", "tools/call other error"}
	for i, w := range want {
		if ends[i] != w {
			t.Errorf("end %d: %q, want %q (all: %v)", i, ends[i], w, ends)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if tp := rec.info[1].Trace.Traceparent; !strings.Contains(tp, "0af7651916cd43dd8448eb211c80319c") {
		t.Errorf("_meta's traceparent should win over the header's: %q", tp)
	}
	if rec.info[1].Era != frontend.EraLegacy || rec.info[1].Transport != "http" || rec.info[1].Version != "2025-11-25" {
		t.Errorf("request info %+v", rec.info[1])
	}
}

func TestObserverNamesTheCancelSource(t *testing.T) {
	rec := &recorder{}
	opts := testOptions()
	opts.Observer = rec
	ex := &fakeExec{started: make(chan string, 1)}
	_, ts := newHTTP(t, opts, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"block","language":"javascript"}}}`, nil)
	<-ex.started
	cr := c.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, nil)
	cr.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	// Modern: closing the stream.
	ctx, cancel := context.WithCancel(context.Background())
	req := modernPost(ctx, ts.URL+"/mcp", "execute_code")
	go func() { <-ex.started; cancel() }()
	if r, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	ends := rec.waitEnds(t, 3)
	if ends[1] != "tools/call execute_code cancelled notification" || ends[2] != "tools/call execute_code cancelled stream_close" {
		t.Errorf("ends %v", ends)
	}
}

func TestRunningListsCallsWithTheirLatestProgress(t *testing.T) {
	ex := &fakeExec{started: make(chan string, 1)}
	s, ts := newHTTP(t, testOptions(), ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	// No progressToken: the client asked for no progress, the view has it anyway.
	resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"name":"execute_code","arguments":{"code":"progress 3","language":"javascript","workspace":"seen"}}}`, nil)
	defer resp.Body.Close()
	<-ex.started
	var rc frontend.RunningCall
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if calls := s.Running(); len(calls) == 1 && strings.HasPrefix(calls[0].Progress, "1/3") {
			rc = calls[0]
			break
		}
	}
	if rc.ID != `"r1"` || rc.Tool != "execute_code" || rc.Tags["workspace"] != "seen" || rc.Tags["language"] != "javascript" || rc.Principal != frontend.LocalPrincipal || rc.Era != frontend.EraLegacy {
		t.Fatalf("running call %+v", rc)
	}
	_, _ = io.ReadAll(resp.Body)
	for deadline := time.Now().Add(5 * time.Second); len(s.Running()) > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	if n := len(s.Running()); n != 0 {
		t.Errorf("%d calls still listed after the answer", n)
	}
	if n := s.OpenStreams(); n != 0 {
		t.Errorf("open streams %d after every answer", n)
	}
}
