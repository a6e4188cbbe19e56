package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchCountSink counts progress calls and does nothing else.
type benchCountSink struct{ n atomic.Int64 }

func (s *benchCountSink) Progress(float64, float64, string) { s.n.Add(1) }

// BenchmarkGuestProgressCall measures the guest side of a progress frame:
// one JavaScript progress(done, total, message) call through the guest ABI
// to the run's ProgressSink, in a warm worker. Each op runs a cell that
// calls progress() 20,000 times, and the same loop without the call; the
// difference per call is reported as ns/progress. Together with the front
// end's BenchmarkProgressFrameLatency (sink → bytes on the socket) it makes
// up "guest progress() → bytes on the socket". The worker's own benchmarks
// (1+1, new worker, interrupt) live beside the worker's tests.
func BenchmarkGuestProgressCall(b *testing.B) {
	e := testEngine(b, true)
	w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()

	const calls = 20000
	with := fmt.Sprintf(`for (let i = 0; i < %d; i++) progress(i, %d, "rows"); 0`, calls, calls)
	without := fmt.Sprintf(`{ let s = 0; for (let i = 0; i < %d; i++) s += i; s }`, calls)
	sink := &benchCountSink{}
	run := func(code string) time.Duration {
		t0 := time.Now()
		r := w.Run(context.Background(), code, RunOptions{Sink: sink})
		d := time.Since(t0)
		if r.Status != StatusOK {
			b.Fatalf("run: %s %v", r.Status, r.Error)
		}
		return d
	}
	run(with) // warm the interpreter
	sink.n.Store(0)
	var dWith, dWithout time.Duration
	for b.Loop() {
		dWith += run(with)
		dWithout += run(without)
	}
	if got := sink.n.Load(); got != int64(b.N)*calls {
		b.Fatalf("sink saw %d calls; want %d", got, int64(b.N)*calls)
	}
	per := float64(dWith-dWithout) / float64(int64(b.N)*calls)
	b.ReportMetric(per, "ns/progress")
}
