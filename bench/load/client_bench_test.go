package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// answerOf is what a server answers the load tool's call id: execd's plain
// JSON answer, or an SSE stream with a progress frame first.
func answerOf(sse bool, id int) string {
	result := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"result":{"content":[{"type":"text","text":"{\"status\":\"ok\",\"result\":\"2\"}"}],"structuredContent":{"status":"ok","result":"2","workspace":"w","language":"javascript","durationMs":0.2}}}`
	if !sse {
		return result
	}
	return "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\nevent: message\ndata: " + result + "\n\n"
}

// BenchmarkCall is the load tool's own cost per call, against a server that
// answers at once: what its CPU figure (LoadCPUUsPerCall) is made of, and
// its allocations.
func BenchmarkCall(b *testing.B) {
	for _, sse := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "sse"}[sse]
		b.Run(name, func(b *testing.B) {
			id := 0 // the client's ids, in order
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if sse {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				id++
				_, _ = io.WriteString(w, answerOf(sse, id))
			}))
			defer ts.Close()
			c := newClient(ts.Client(), ts.URL, "modern")
			tc := toolCall{tool: "execute_code", code: "1+1", language: "javascript", workspace: "w"}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r, err := c.call(context.Background(), tc, nil)
				if err != nil || r.failure() != "" || !strings.HasPrefix(r.result["status"].(string), "ok") {
					b.Fatalf("%v %s %v", err, r.failure(), r.result)
				}
			}
		})
	}
}
