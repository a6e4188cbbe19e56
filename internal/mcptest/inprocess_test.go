package mcptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// An SSE answer served in process streams in fake time: a frame, a second
// of the handler's own time, the response; and a client that closes the
// stream cancels the handler's context.
func TestInProcessInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gone := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"method\":\"notifications/progress\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-time.After(time.Second):
				fmt.Fprint(w, "data: {\"id\":1,\"result\":{\"structuredContent\":{}}}\n\n")
			case <-r.Context().Done():
				gone <- r.Context().Err()
			}
		})
		c := &Client{T: t, URL: "http://127.0.0.1/mcp", HTTP: InProcess(h)}
		start := time.Now()
		var frameAt time.Duration
		m, err := c.Call(context.Background(), 1, "tools/call", nil, func(map[string]any) bool { frameAt = time.Since(start); return true })
		if err != nil || m["id"] != float64(1) || frameAt != 0 || time.Since(start) != time.Second {
			t.Fatalf("%v %v: frame at %v, answer at %v", m, err, frameAt, time.Since(start))
		}
		if _, err := c.Call(context.Background(), 1, "tools/call", nil, func(map[string]any) bool { return false }); !errors.Is(err, ErrClosed) {
			t.Fatalf("closing on the frame: %v", err)
		}
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's context: %v", err)
		}
	})
}
