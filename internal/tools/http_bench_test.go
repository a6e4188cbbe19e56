package tools

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"execd/internal/workspace"
)

// benchExec answers every run at once with result "2", or hands the run to
// onRun when set. Unlike fakeExec it keeps no history, so that allocations
// per operation stay flat however long a benchmark runs.
type benchExec struct {
	noWorkspaces
	onRun func(ctx context.Context, req workspace.Request)
}

func (e *benchExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	if e.onRun != nil {
		e.onRun(ctx, req)
	}
	v := "2"
	return workspace.Outcome{Workspace: req.Workspace, Result: workspace.Result{Status: workspace.StatusOK, Value: &v, Duration: time.Millisecond}}, nil
}

const (
	benchModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	benchCallArgs   = `"name":"execute_code","arguments":{"code":"1+1","language":"javascript","workspace":"bench"}`
)

// benchRequest is one POST as a client of an era sends it.
func benchRequest(era, session, accept, body string, hdr map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Host = "127.0.0.1"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", accept)
	if era == "legacy" {
		r.Header.Set("Mcp-Session-Id", session)
		r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	} else {
		r.Header.Set("MCP-Protocol-Version", "2026-07-28")
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

// benchSession opens a legacy session on h and returns its id.
func benchSession(b *testing.B, h http.Handler) string {
	b.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	r.Host = "127.0.0.1"
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	sid := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	return sid
}

// BenchmarkRequest measures one POST through the whole front end: body
// read, JSON-RPC decode, era detection, _meta and header validation,
// routing, the tool handler (with an executor that answers at once), result
// shaping and encoding, and the JSON or SSE answer. The executor costs
// nothing, so this is execd's per-call overhead outside the sandbox.
func BenchmarkRequest(b *testing.B) {
	cases := []struct {
		name, era, accept, body string
		hdr                     map[string]string
		want                    string
	}{
		// A client that accepts both (every client here) gets a quick
		// answer as JSON; one that accepts only SSE, a one-event stream.
		{"legacy/tools-call-both", "legacy", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `}}`, nil, "application/json"},
		{"legacy/tools-call-sse", "legacy", "text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `}}`, nil, "text/event-stream"},
		{"legacy/tools-call-json", "legacy", "application/json",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `}}`, nil, "application/json"},
		{"legacy/tools-list", "legacy", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil, "application/json"},
		{"modern/tools-call-both", "modern", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,` + benchModernMeta + `}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "bench"}, "application/json"},
		{"modern/tools-call-sse", "modern", "text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,` + benchModernMeta + `}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "bench"}, "text/event-stream"},
		// A client that can be asked (Claude Code declares elicitation):
		// the run goes apart from its request, in case the code asks.
		{"modern/tools-call-sse-elicitation", "modern", "text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,` + strings.Replace(benchModernMeta, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{}}`, 1) + `}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "bench"}, "text/event-stream"},
		{"modern/tools-call-json", "modern", "application/json",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,` + benchModernMeta + `}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "bench"}, "application/json"},
		{"modern/tools-list", "modern", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + benchModernMeta + `}}`,
			map[string]string{"Mcp-Method": "tools/list"}, "application/json"},
		{"modern/rejected-header-mismatch", "modern", "application/json, text/event-stream",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,` + benchModernMeta + `}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "other"}, "application/json"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := newTestServer(testOptions(), &benchExec{})
			h := s.Handler()
			sid := ""
			if tc.era == "legacy" {
				sid = benchSession(b, h)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, benchRequest(tc.era, sid, tc.accept, tc.body, tc.hdr))
				if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.want) {
					b.Fatalf("Content-Type %q; want %q (%d %s)", ct, tc.want, w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkProgressFrameLatency measures a progress report's way from the
// worker's ProgressSink call to the bytes of its frame read by a client on
// the socket, over real HTTP on loopback, in both eras. The executor stands
// in for the worker: it calls Sink.Progress exactly as the worker's host
// function does, and the client timestamps each frame as its line arrives.
//
// The reporter coalesces frames closer than its 250ms interval, and the
// "started" frame is sent when the run begins; each report here therefore
// waits out the interval first, so ns/op is ~250ms and meaningless: the
// figures are the p50/p99/max-ns/frame metrics. The sub-benchmark
// "coalesced" reports at once after the start frame, as a guest's first
// progress() usually does, and shows the interval's delay.
func BenchmarkProgressFrameLatency(b *testing.B) {
	for _, era := range []string{"legacy", "modern"} {
		b.Run(era, func(b *testing.B) { benchProgressLatency(b, era, true) })
	}
	b.Run("modern/coalesced", func(b *testing.B) { benchProgressLatency(b, "modern", false) })
}

func benchProgressLatency(b *testing.B, era string, waitInterval bool) {
	const interval = 250*time.Millisecond + 5*time.Millisecond
	sent := make(chan time.Time, 1)
	got := make(chan time.Time, 1)
	n := b.N
	ex := &benchExec{onRun: func(ctx context.Context, req workspace.Request) {
		last := time.Now() // the reporter's start frame has just gone out
		for i := range n {
			if waitInterval {
				time.Sleep(time.Until(last.Add(interval)))
			}
			t0 := time.Now()
			req.Sink.Progress(float64(i+1), 0, "rows")
			sent <- t0
			select {
			case last = <-got:
			case <-ctx.Done():
				return
			}
		}
	}}
	s := newTestServer(testOptions(), ex)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	hc := ts.Client()
	sid := ""
	if era == "legacy" {
		resp, err := hc.Do(benchHTTPRequest(ts.URL, era, "",
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, nil))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sid = resp.Header.Get("Mcp-Session-Id")
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs + `,"_meta":{"progressToken":"p"}}}`
	var hdr map[string]string
	if era == "modern" {
		body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + benchCallArgs +
			`,"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		hdr = map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "bench"}
	}

	b.ResetTimer()
	resp, err := hc.Do(benchHTTPRequest(ts.URL, era, sid, body, hdr))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	lat := make([]time.Duration, 0, n)
	rd := bufio.NewReader(resp.Body)
	frames := 0
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			break
		}
		if !bytes.HasPrefix(line, []byte("data: ")) || !bytes.Contains(line, []byte("notifications/progress")) {
			continue
		}
		frames++
		if frames == 1 {
			continue // the reporter's own "started" frame
		}
		t1 := time.Now()
		lat = append(lat, t1.Sub(<-sent))
		got <- t1
	}
	b.StopTimer()
	if len(lat) != n {
		b.Fatalf("read %d progress frames; want %d", len(lat), n)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns/frame")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ns/frame")
	b.ReportMetric(float64(lat[len(lat)-1]), "max-ns/frame")
}

func benchHTTPRequest(url, era, session, body string, hdr map[string]string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		r.Header.Set("Mcp-Session-Id", session)
		r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	if era == "modern" {
		r.Header.Set("MCP-Protocol-Version", "2026-07-28")
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}
