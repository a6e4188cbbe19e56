package frontend

import (
	"encoding/json"
	"net/http"
	"testing"

	"execd/internal/progress"
)

// discardFlusher is a ResponseWriter that throws the bytes away, so that
// BenchmarkSSEFrame measures the writer, not a growing buffer.
type discardFlusher struct {
	hdr http.Header
	n   int
}

func (d *discardFlusher) Header() http.Header         { return d.hdr }
func (d *discardFlusher) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }
func (d *discardFlusher) WriteHeader(int)             {}
func (d *discardFlusher) Flush()                      {}

// BenchmarkSSEFrame measures writing one notifications/progress frame on
// a call's SSE stream: JSON-RPC encoding of the params, the data: framing,
// the locks and the flush call (the socket write is not included; see
// BenchmarkProgressFrameLatency for that).
func BenchmarkSSEFrame(b *testing.B) {
	w := &discardFlusher{hdr: http.Header{}}
	out := &postSink{w: w, acceptSSE: true}
	out.open("tools/call")
	defer out.close()
	c := &Call{out: out}
	total := 10.0
	p := progress.Params{ProgressToken: json.RawMessage(`7`), Progress: 3, Total: &total, Message: "3/10 rows"}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Notify("notifications/progress", p); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(w.n) / int64(max(b.N, 1)))
}
