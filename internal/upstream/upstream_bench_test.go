package upstream

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
	"execd/internal/upstream/upstreamtest"
)

// BenchmarkCalls: 1,000 sequential calls of the fake's echo through the
// Hub (a Run: access check, count, frame filter, result conversion, log
// line) against the same calls by a plain go-sdk client over its own
// CommandTransport, the floor. Reported: the time per call of each and
// their ratio (hub-x-floor).
//
//	go test -run '^$' -bench BenchmarkCalls -benchtime 5x ./internal/upstream/
func BenchmarkCalls(b *testing.B) {
	const calls = 1000
	ctx := context.Background()
	a := json.RawMessage(`{"text":"hi"}`)

	fl := upstreamtest.NewEchoFloor(b)
	h := newHub(b, Options{Log: zap.NewNop()}, fakeUpstream(b, "fake", func(u *config.Upstream) { u.MaxCallsPerRun = calls }))
	run := h.NewRun("local", nil)
	if _, err := run.Call(ctx, "fake", "echo", a, nil); err != nil { // started and listed
		b.Fatal(err)
	}
	var floor, hub time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		floor += fl.Echo(b, calls)
		start := time.Now()
		r := h.NewRun("local", nil) // max_calls_per_run is per run
		for j := 0; j < calls; j++ {
			if _, err := r.Call(ctx, "fake", "echo", a, nil); err != nil {
				b.Fatal(err)
			}
		}
		hub += time.Since(start)
	}
	n := float64(b.N * calls)
	b.ReportMetric(float64(floor.Nanoseconds())/n, "floor-ns/call")
	b.ReportMetric(float64(hub.Nanoseconds())/n, "hub-ns/call")
	b.ReportMetric(float64(hub)/float64(floor), "hub-x-floor")
}
