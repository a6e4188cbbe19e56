package worker

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// go test -run '^$' -bench . -benchtime=1x ./internal/worker/ keeps these
// compiling; real figures: -bench . -count 5.

func forModes(b *testing.B, f func(b *testing.B, strict bool)) {
	for _, strict := range []bool{true, false} {
		name := "strict=off"
		if strict {
			name = "strict=on"
		}
		b.Run(name, func(b *testing.B) { f(b, strict) })
	}
}

func BenchmarkCompileCold(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		ctx := context.Background()
		for b.Loop() {
			e, err := NewEngine(ctx, Config{StrictTermination: strict}, nil)
			if err != nil {
				b.Fatal(err)
			}
			e.Close(ctx)
		}
	})
}

func BenchmarkCompileWarm(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		ctx := context.Background()
		cfg := Config{StrictTermination: strict, CacheDir: b.TempDir()}
		e, err := NewEngine(ctx, cfg, nil) // fills the on-disk cache
		if err != nil {
			b.Fatal(err)
		}
		e.Close(ctx)
		for b.Loop() {
			e, err := NewEngine(ctx, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			e.Close(ctx)
		}
	})
}

func BenchmarkNewWorker(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		e := testEngine(b, strict)
		for b.Loop() {
			w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			w.Close()
		}
	})
}

func benchRun(b *testing.B, strict bool, setup, code string) {
	w := newWorker(b, testEngine(b, strict), WorkerOptions{})
	if setup != "" {
		if r := w.Run(context.Background(), setup, nil); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
	}
	for b.Loop() {
		if r := w.Run(context.Background(), code, nil); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) { benchRun(b, strict, "", "1+1") })
}

func BenchmarkFib25(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		benchRun(b, strict, "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }", "fib(25)")
	})
}

// BenchmarkSoftInterrupt: from the cancel of a run spinning in `for (;;)`
// to Run returning with its state kept.
func BenchmarkSoftInterrupt(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		w := newWorker(b, testEngine(b, strict), WorkerOptions{})
		var total time.Duration
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			var at time.Time
			rec := &progressRec{fn: func() { at = time.Now(); cancel() }}
			r := w.Run(ctx, "progress(1); for (;;) {}", rec)
			total += time.Since(at)
			cancel()
			if r.Status != StatusInterrupted || r.Reset {
				b.Fatal(describe(r))
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/interrupt")
	})
}

// BenchmarkIdleWorkerRSS: resident memory added by one idle worker that has
// run one cell.
func BenchmarkIdleWorkerRSS(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		e := testEngine(b, strict)
		const n = 20
		for b.Loop() {
			debug.FreeOSMemory()
			before := rssKiB(b)
			ws := make([]*Worker, n)
			for i := range ws {
				w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				w.Run(context.Background(), "let a = [1, 2, 3]; a.length", nil)
				ws[i] = w
			}
			debug.FreeOSMemory()
			after := rssKiB(b)
			b.ReportMetric(float64(after-before)/1024/n, "MiB/worker")
			for _, w := range ws {
				w.Close()
			}
		}
	})
}

func rssKiB(b *testing.B) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			v, _ := strconv.Atoi(strings.Fields(rest)[0])
			return v
		}
	}
	b.Skip("no VmRSS")
	return 0
}
