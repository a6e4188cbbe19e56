package worker

import (
	"context"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream/upstreamtest"
)

// BenchmarkToolCalls: 1,000 sequential calls of the fake upstream's echo
// from one run of each guest (tool_call, net_wait, net_head through the
// Hub) against the same calls by a plain go-sdk client over its own
// CommandTransport on the host, the floor. Reported per call: floor-ns,
// js-ns, py-ns, and js-x-floor, py-x-floor.
//
//	go test -run '^$' -bench BenchmarkToolCalls -benchtime 3x ./internal/worker/
func BenchmarkToolCalls(b *testing.B) {
	const calls = 1000
	ctx := context.Background()
	fl := upstreamtest.NewEchoFloor(b)
	h := toolsHub(b, func(u *config.Upstream) { u.MaxCallsPerRun = calls })
	e := testEngine(b, true)
	workers := map[string]*Worker{}
	for _, lang := range []string{"javascript", "python"} {
		w, err := e.NewWorker(ctx, lang, WorkerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		workers[lang] = w
	}
	codes := map[string]string{
		"javascript": `for (let i = 0; i < 1000; i++) await tools.fake.echo({text: "hi"}); 1`,
		"python":     "from execd import tools\nfor _ in range(1000):\n    tools.fake.echo(text='hi')\n1",
	}
	run := func(lang string) time.Duration {
		start := time.Now()
		r := workers[lang].Run(ctx, codes[lang], RunOptions{Tools: h.NewRun("local", nil)})
		if r.Status != StatusOK {
			b.Fatalf("%s: %s\n%s", lang, describe(r), r.Stderr)
		}
		return time.Since(start)
	}
	run("javascript") // the upstream started and listed, both guests warm
	run("python")
	var floor, js, py time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		floor += fl.Echo(b, calls)
		js += run("javascript")
		py += run("python")
	}
	n := float64(b.N * calls)
	b.ReportMetric(float64(floor.Nanoseconds())/n, "floor-ns/call")
	b.ReportMetric(float64(js.Nanoseconds())/n, "js-ns/call")
	b.ReportMetric(float64(py.Nanoseconds())/n, "py-ns/call")
	b.ReportMetric(float64(js)/float64(floor), "js-x-floor")
	b.ReportMetric(float64(py)/float64(floor), "py-x-floor")
}
