// Package network measures the network of sandboxed code against its
// floor: 1,000 sequential fetches of a small loopback document from
// JavaScript (fetch) and from Python (requests), each through the whole
// path (guest, execd.net_* imports, the policy of internal/egress, its
// HTTP client), beside a plain Go net/http client doing the same on the
// host, and the host's side alone (the policy and its client, no guest).
// Reported per fetch: the time (ns/fetch), its ratio to the floor
// (x_floor), and the growth of the process's resident memory over the
// runs of 1,000 (rss_growth_KiB, after a collection). Also: five fetches of a 500 ms answer under
// Promise.all (s/all, one answer's time when they run concurrently), and a
// 1 s timeout during a slow response (ms/stop, when the run ends).
//
//	go test -run '^$' -bench . -benchtime 3x ./bench/network/
//
// BENCHMARKS.md has the figures.
package network

import (
	"context"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"testing"
	"time"

	"execd/internal/egress"
	"execd/internal/egress/egresstest"
	"execd/internal/procstat"
	"execd/internal/worker"
)

const fetches = 1000

type bench struct {
	srv    *egresstest.Servers
	svc    *egress.Service
	engine *worker.Engine
	url    string
	floor  time.Duration // per fetch, the median of three rounds
}

func setup(b *testing.B) *bench {
	b.Helper()
	srv := egresstest.Start(b)
	c := srv.Config(srv.Allow()...)
	c.MaxRequestsPerRun = 10 * fetches
	c.BytesPerMinute = 0
	svc, err := egress.New(c, egress.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = b.TempDir()
	}
	e, err := worker.NewEngine(context.Background(), worker.Config{CacheDir: cache + "/execd/bench-network", StrictTermination: true}, nil)
	if err != nil {
		b.Fatalf("NewEngine: %v (build the guests first: make guests)", err)
	}
	b.Cleanup(func() { e.Close(context.Background()) })
	for _, lang := range e.Languages() {
		if err := e.Wait(context.Background(), lang); err != nil {
			b.Fatal(err)
		}
	}
	bn := &bench{srv: srv, svc: svc, engine: e, url: "http://" + srv.HTTPHost() + "/text"}
	var rounds []time.Duration
	for range 3 {
		rounds = append(rounds, bn.goFloor(b))
	}
	sort.Slice(rounds, func(i, j int) bool { return rounds[i] < rounds[j] })
	bn.floor = rounds[1] / fetches
	return bn
}

// goFloor is a plain net/http client's 1,000 sequential GETs.
func (bn *bench) goFloor(b *testing.B) time.Duration {
	cl := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer cl.CloseIdleConnections()
	start := time.Now()
	for range fetches {
		resp, err := cl.Get(bn.url)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	return time.Since(start)
}

// rssKiB is the process's resident memory after a collection that gives
// back what it can.
func rssKiB(b *testing.B) int64 {
	debug.FreeOSMemory()
	n, err := procstat.SelfRSSKiB()
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func (bn *bench) worker(b *testing.B, lang string) *worker.Worker {
	w, err := bn.engine.NewWorker(context.Background(), lang, worker.WorkerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return w
}

func (bn *bench) run(b *testing.B, w *worker.Worker, code string) worker.Result {
	r := w.Run(context.Background(), code, worker.RunOptions{Network: bn.svc.Session("local", "bench")})
	if r.Status != worker.StatusOK {
		msg := ""
		if r.Error != nil {
			msg = r.Error.Message
		}
		b.Fatalf("%s: %s\n%s", r.Status, msg, r.Stderr)
	}
	return r
}

func BenchmarkSequentialFetches(b *testing.B) {
	bn := setup(b)
	b.Run("go-floor", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			total += bn.goFloor(b)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*fetches), "ns/fetch")
	})
	// The host's side alone: the policy and its client, no guest.
	b.Run("egress", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			x := bn.svc.Session("local", "bench")
			start := time.Now()
			for range fetches {
				if _, err := x.Do(context.Background(), &egress.Request{Method: "GET", URL: bn.url}); err != nil {
					b.Fatal(err)
				}
			}
			total += time.Since(start)
		}
		per := float64(total.Nanoseconds()) / float64(b.N*fetches)
		b.ReportMetric(per, "ns/fetch")
		b.ReportMetric(per/float64(bn.floor.Nanoseconds()), "x_floor")
	})
	for _, c := range []struct{ name, lang, code string }{
		{"javascript", "javascript", `let n = 0; for (let i = 0; i < ` + strconv.Itoa(fetches) + `; i++) n += (await (await fetch("` + bn.url + `")).text()).length; n`},
		{"python-requests", "python", "import requests\nn = 0\nfor i in range(" + strconv.Itoa(fetches) + "):\n    n += len(requests.get(\"" + bn.url + "\").text)\nn"},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := bn.worker(b, c.lang)
			bn.run(b, w, "1") // the first run of a new worker is not the network's
			if c.lang == "python" {
				bn.run(b, w, "import requests")
			}
			before := rssKiB(b)
			var total time.Duration
			for b.Loop() {
				r := bn.run(b, w, c.code)
				total += r.Duration
			}
			per := float64(total.Nanoseconds()) / float64(b.N*fetches)
			b.ReportMetric(per, "ns/fetch")
			b.ReportMetric(per/float64(bn.floor.Nanoseconds()), "x_floor")
			b.ReportMetric(float64(rssKiB(b)-before), "rss_growth_KiB")
		})
	}
}

// BenchmarkConcurrentFetches: Promise.all of five fetches each answered
// after 500 ms: about 0.5 s when they run concurrently on the host, 2.5 s
// if one after another.
func BenchmarkConcurrentFetches(b *testing.B) {
	bn := setup(b)
	w := bn.worker(b, "javascript")
	code := `await Promise.all([1, 2, 3, 4, 5].map(() => fetch("http://` + bn.srv.HTTPHost() + `/slow?ms=500").then((r) => r.text()))); 1`
	var total time.Duration
	for b.Loop() {
		total += bn.run(b, w, code).Duration
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/all")
}

// BenchmarkTimeoutDuringSlowResponse: a run with a 1 s timeout that waits
// for a response which takes two minutes ends at about 1 s.
func BenchmarkTimeoutDuringSlowResponse(b *testing.B) {
	bn := setup(b)
	for _, lang := range []string{"javascript", "python"} {
		b.Run(lang, func(b *testing.B) {
			w := bn.worker(b, lang)
			code := `await fetch("http://` + bn.srv.HTTPHost() + `/slow?ms=120000")`
			if lang == "python" {
				code = "import requests\nrequests.get(\"http://" + bn.srv.HTTPHost() + "/slow?ms=120000\")"
			}
			var total time.Duration
			for b.Loop() {
				r := w.Run(context.Background(), code, worker.RunOptions{Network: bn.svc.Session("local", "bench"), Timeout: time.Second})
				if r.Status != worker.StatusTimeout {
					b.Fatalf("status %s", r.Status)
				}
				total += r.Duration
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/stop")
		})
	}
}
