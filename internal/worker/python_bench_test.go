package worker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Python guest figures. Every one runs with -benchtime=1x in CI; real
// figures: go test -run '^$' -bench Python -count 5 ./internal/worker/

const pyFib = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)"

// pyBenchEngine: the package's shared engine for the strict mode, which
// must have the Python guest.
func pyBenchEngine(b *testing.B, strict bool) *Engine {
	b.Helper()
	e := testEngine(b, strict)
	if !contains(e.Languages(), "python") {
		b.Fatalf("python guest not built (languages: %v): run make guests", e.Languages())
	}
	return e
}

// BenchmarkPythonNewWorker: a new workspace's interpreter, from instantiate
// to the first cell's result.
func BenchmarkPythonNewWorker(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		e := pyBenchEngine(b, strict)
		for b.Loop() {
			w, err := e.NewWorker(context.Background(), "python", WorkerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if r := w.Run(context.Background(), "1+1", RunOptions{}); r.Status != StatusOK {
				b.Fatal(describe(r))
			}
			w.Close()
		}
	})
}

func pyBenchRun(b *testing.B, strict bool, setup, code string) {
	w, err := pyBenchEngine(b, strict).NewWorker(context.Background(), "python", WorkerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if setup != "" {
		if r := w.Run(context.Background(), setup, RunOptions{}); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
	}
	for b.Loop() {
		if r := w.Run(context.Background(), code, RunOptions{}); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
	}
}

func BenchmarkPythonRoundTrip(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) { pyBenchRun(b, strict, "", "1+1") })
}

// BenchmarkPythonFib25 runs fib(25) in the guest; the native sub-benchmark
// times the same function in the machine's python3.11 in the same run (it
// fails when python3.11 is missing).
func BenchmarkPythonFib25(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) { pyBenchRun(b, strict, pyFib, "fib(25)") })
	b.Run("native", func(b *testing.B) {
		script := pyFib + `
import time
t = time.perf_counter()
fib(25)
print(time.perf_counter() - t)`
		var total time.Duration
		for b.Loop() {
			out, err := exec.Command("python3.11", "-c", script).Output()
			if err != nil {
				b.Fatalf("python3.11: %v", err)
			}
			sec, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				b.Fatalf("python3.11 output %q: %v", out, err)
			}
			total += time.Duration(sec * float64(time.Second))
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/fib25")
	})
}

// BenchmarkPythonSoftInterrupt: from the cancel of a run spinning in
// `while True: pass` to Run returning with its state kept.
func BenchmarkPythonSoftInterrupt(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		w, err := pyBenchEngine(b, strict).NewWorker(context.Background(), "python", WorkerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		// The first error of a worker imports traceback (~0.1-0.2 s): keep
		// that out of the figure.
		if r := w.Run(context.Background(), "raise ValueError", RunOptions{}); r.Status != StatusError {
			b.Fatal(describe(r))
		}
		var total time.Duration
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			var at time.Time
			rec := &progressRec{fn: func() { at = time.Now(); cancel() }}
			r := w.Run(ctx, "from execd import progress\nprogress(1)\nwhile True: pass", RunOptions{Sink: rec})
			total += time.Since(at)
			cancel()
			if r.Status != StatusInterrupted || r.Discontinuous() {
				b.Fatal(describe(r))
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/interrupt")
	})
}

// BenchmarkPythonIdleWorkerRSS: resident memory added per idle worker that
// has run one cell (RSS and PSS, see idleWorkers).
func BenchmarkPythonIdleWorkerRSS(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		idleWorkers(b, pyBenchEngine(b, strict), "python", 8, "x = [i for i in range(1000)]")
	})
}
