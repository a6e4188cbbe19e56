package worker

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
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
			r := w.Run(ctx, "progress(1); for (;;) {}", RunOptions{Sink: rec})
			total += time.Since(at)
			cancel()
			if r.Status != StatusInterrupted || r.Discontinuous() {
				b.Fatal(describe(r))
			}
		}
		b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/interrupt")
	})
}

// BenchmarkIdleWorkerRSS: resident memory added by one idle worker that has
// run one cell: RSS, PSS (proportional: pages shared copy-on-write with
// the base image are divided among the workers that map them) and
// anonymous memory (the pages only this worker has: its copies of base
// pages it wrote, and its share of the Go heap), which is what the machine
// gives each worker. RSS overstates that cost: it counts every base page a
// worker has mapped, and on a read fault of a shared file mapping Linux
// maps up to 16 cached neighbours at once (fault-around).
func BenchmarkIdleWorkerRSS(b *testing.B) {
	forModes(b, func(b *testing.B, strict bool) {
		idleWorkers(b, testEngine(b, strict), "javascript", 20, "let a = [1, 2, 3]; a.length")
	})
}

// idleWorkers makes n workers of lang that each ran code and reports the
// growth of RSS and PSS per worker: the largest of the iterations (after
// the first, the Go heap reuses what the closed workers gave back, and the
// growth understates the cost); the -trimmed figures are the same after
// Trim, as the workspace janitor leaves an idle interpreter.
func idleWorkers(b *testing.B, e *Engine, lang string, n int, code string) {
	var untrimmed, trimmed growth
	for b.Loop() {
		runtime.GC()
		debug.FreeOSMemory()
		before := memoryKiB(b)
		ws := make([]*Worker, 0, n)
		for range n {
			w, err := e.NewWorker(context.Background(), lang, WorkerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if r := w.Run(context.Background(), code, RunOptions{}); r.Status != StatusOK {
				b.Fatal(describe(r))
			}
			ws = append(ws, w)
		}
		untrimmed.add(b, before, n)
		for _, w := range ws {
			w.Trim()
		}
		trimmed.add(b, before, n)
		for _, w := range ws {
			w.Close()
		}
	}
	untrimmed.report(b, "")
	trimmed.report(b, "-trimmed")
}

// growth is the largest growth per worker of RSS, PSS and anonymous
// memory, in MiB, over the iterations of idleWorkers.
type growth struct{ rss, pss, anon float64 }

// add collects the garbage and takes the growth per worker of n workers
// since before.
func (g *growth) add(b *testing.B, before kib, n int) {
	runtime.GC()
	debug.FreeOSMemory()
	now := memoryKiB(b)
	per := func(now, before int) float64 { return float64(now-before) / 1024 / float64(n) }
	g.rss = max(g.rss, per(now.rss, before.rss))
	g.pss = max(g.pss, per(now.pss, before.pss))
	g.anon = max(g.anon, per(now.anon, before.anon))
}

func (g *growth) report(b *testing.B, suffix string) {
	b.ReportMetric(g.rss, "MiB-RSS"+suffix+"/worker")
	b.ReportMetric(g.pss, "MiB-PSS"+suffix+"/worker")
	b.ReportMetric(g.anon, "MiB-anon"+suffix+"/worker")
}

type kib struct{ rss, pss, anon int }

// memoryKiB reads the process's Rss, Pss and Anonymous from
// /proc/self/smaps_rollup.
func memoryKiB(b *testing.B) kib {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		b.Fatalf("no /proc/self/smaps_rollup: %v", err)
	}
	defer f.Close()
	var m kib
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, rest, _ := strings.Cut(s.Text(), ":")
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, _ := strconv.Atoi(fields[0])
		switch k {
		case "Rss":
			m.rss = v
		case "Pss":
			m.pss = v
		case "Anonymous":
			m.anon = v
		}
	}
	return m
}

// BenchmarkFairness: how long a call waits for a processor while twice as
// many endless loops as there are processors run in other workers, with
// and without the yield at the guest's polls; and what the yield costs on
// fib(25) and 1+1 alone. Each iteration of "1+1-beside-loops" sleeps 1 ms
// first, so that the calling goroutine must be scheduled again, as a
// request's is when its bytes arrive; "1+1-after-sleep" is the same
// without the loops.
func BenchmarkFairness(b *testing.B) {
	e := testEngine(b, true)
	sleepThenRun := func(b *testing.B, w *Worker) {
		timed(b, func() {
			time.Sleep(time.Millisecond)
			if r := w.Run(context.Background(), "1+1", RunOptions{}); r.Status != StatusOK {
				b.Fatal(describe(r))
			}
		})
	}
	for _, yield := range []bool{true, false} {
		name := "yield=off"
		if yield {
			name = "yield=on"
		}
		b.Run(name, func(b *testing.B) {
			yieldAtPolls.Store(yield)
			defer yieldAtPolls.Store(true)
			b.Run("1+1-after-sleep", func(b *testing.B) { sleepThenRun(b, newWorker(b, e, WorkerOptions{})) })
			b.Run("1+1-beside-loops", func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for range 2 * runtime.GOMAXPROCS(0) {
					w := newWorker(b, e, WorkerOptions{})
					wg.Add(1)
					go func() { defer wg.Done(); w.Run(ctx, "for (;;) {}", RunOptions{}) }()
				}
				w := newWorker(b, e, WorkerOptions{})
				time.Sleep(50 * time.Millisecond) // the loops are spinning
				sleepThenRun(b, w)
				cancel()
				wg.Wait()
			})
			b.Run("fib25", func(b *testing.B) {
				benchRun(b, true, "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }", "fib(25)")
			})
			b.Run("1+1", func(b *testing.B) { benchRun(b, true, "", "1+1") })
			b.Run("python-fib25", func(b *testing.B) { pyBenchRun(b, true, pyFib, "fib(25)") })
		})
	}
}
