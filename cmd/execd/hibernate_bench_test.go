package main

// Benchmarks of hibernation: saving and restoring one workspace per
// language (in process, the real engine and registry), the memory of many
// idle workspaces with only max_workspaces live, and a restart with many
// hibernated ones (the real binary over HTTP).

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"execd/internal/mcptest"
	"execd/internal/worker"
	"execd/internal/workspace"
)

var (
	idleWorkspaces      = flag.Int("idle-workspaces", 10000, "workspaces BenchmarkIdleWorkspacesMemory makes")
	hibernatedAtRestart = flag.Int("hibernated-at-restart", 1000, "hibernated workspaces BenchmarkRestartWithHibernated starts with")
)

// reportLatency reports the median and the 99th percentile of lat in ms.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// benchStates are what the hibernation benchmark keeps in a workspace, by
// language and size: one variable, or 2000 small records (Python with the
// 14 common stdlib modules imported); ask reads the state back.
var benchStates = map[string]map[string]struct{ define, ask, want string }{
	"javascript": {
		"small": {`var v = 1; v`, "v", "1"},
		"data":  {`var data = Array.from({length: 2000}, (_, i) => ({i, s: "item " + i})); data.length`, "data.length", "2000"},
	},
	"python": {
		"small": {"v = 1\nv", "v", "1"},
		"data": {"import json, re, datetime, collections, decimal, statistics, csv, dataclasses, uuid, random, math, itertools, functools, typing\n" +
			"data = [{'i': i, 's': 'item %d' % i} for i in range(2000)]\nlen(data)", "len(data)", "2000"},
	},
}

// BenchmarkHibernateRestore saves one workspace's interpreter to disk and
// restores it, per language: hibernate-p50/p99 is Manager.Hibernate, the
// restore figures are the next call (restore plus a tiny run), and
// image-bytes the image on disk.
func BenchmarkHibernateRestore(b *testing.B) {
	engine, err := worker.NewEngine(context.Background(), worker.Config{StrictTermination: true, CacheDir: benchCacheDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer engine.Close(context.Background())
	for _, lang := range engine.Languages() {
		for _, size := range []string{"small", "data"} {
			st := benchStates[lang][size]
			b.Run(lang+"/"+size, func(b *testing.B) {
				m, err := workspace.NewManager(workspace.Config{DataDir: b.TempDir()}, workspace.EngineFactory(engine), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(context.Background())
				ctx := context.Background()
				run := func(code string) workspace.Outcome {
					out, err := m.Run(ctx, workspace.Request{Principal: "p", Workspace: "w", Language: lang, Code: code})
					if err != nil || out.Result.Status != workspace.StatusOK {
						b.Fatalf("%s: %+v %v", code, out, err)
					}
					return out
				}
				run(st.define)
				var hib, res []time.Duration
				var bytes int64
				for b.Loop() {
					start := time.Now()
					if err := m.Hibernate(ctx, "p", "w"); err != nil {
						b.Fatal(err)
					}
					hib = append(hib, time.Since(start))
					if l := m.List("p"); len(l) == 1 {
						bytes = l[0].StateBytes
					}
					start = time.Now()
					if out := run(st.ask); !out.Restored || *out.Result.Value != st.want {
						b.Fatalf("not restored: %+v", out)
					}
					res = append(res, time.Since(start))
				}
				slices.Sort(hib)
				slices.Sort(res)
				b.ReportMetric(ms(hib[len(hib)/2]), "hibernate-p50-ms")
				b.ReportMetric(ms(hib[min(len(hib)-1, len(hib)*99/100)]), "hibernate-p99-ms")
				b.ReportMetric(ms(res[len(res)/2]), "restore-p50-ms")
				b.ReportMetric(ms(res[min(len(res)-1, len(res)*99/100)]), "restore-p99-ms")
				b.ReportMetric(float64(bytes), "image-bytes")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchCacheDir is the compilation cache the daemon uses by default, so
// that benchmarks do not recompile the guests.
func benchCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "execd", "wazero")
	}
	return ""
}

// benchDaemon is a daemon started by a benchmark.
type benchDaemon struct {
	cmd    *exec.Cmd
	url    string
	start  time.Time
	exited chan struct{}
	hc     *http.Client
}

// launchBench starts the binary with the TOML config and waits for its URL.
func launchBench(b *testing.B, toml string) *benchDaemon {
	b.Helper()
	cfg := filepath.Join(b.TempDir(), "execd.toml")
	os.WriteFile(cfg, []byte(toml), 0o600)
	d := &benchDaemon{cmd: exec.Command(binPath, "-config", cfg), exited: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	stderr, _ := d.cmd.StderrPipe()
	d.start = time.Now()
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenURLRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	go func() { d.cmd.Wait(); close(d.exited) }()
	b.Cleanup(func() { d.cmd.Process.Kill(); <-d.exited })
	select {
	case d.url = <-urlc:
	case <-d.exited:
		b.Fatal("execd exited at start")
	case <-time.After(60 * time.Second):
		b.Fatal("execd did not start")
	}
	return d
}

// call runs code over HTTP (2026-07-28 era) and returns the result's
// "result" field, or a description of what came back instead.
func (d *benchDaemon) call(token, ws, lang, code string) string {
	args := map[string]any{"code": code, "language": lang, "workspace": ws}
	sc := d.tool(token, "execute_code", args)
	if sc == nil {
		return "no answer"
	}
	if r, ok := sc["result"].(string); ok && sc["status"] == "ok" {
		return r
	}
	b, _ := json.Marshal(sc)
	return string(b)
}

// tool calls a tool in the 2026-07-28 era and returns its structured
// content, nil for no result; it never fails the benchmark, so that
// goroutines may call it.
func (d *benchDaemon) tool(token, name string, args map[string]any) map[string]any {
	c := &mcptest.Client{URL: d.url, Token: token, HTTP: d.hc}
	m, err := c.Call(context.Background(), 1, "tools/call", map[string]any{"name": name, "arguments": args}, nil)
	if err != nil {
		return nil
	}
	sc, _, _ := mcptest.Structured(m)
	return sc
}

// waitRunning waits until principal a has n calls running.
func (d *benchDaemon) waitRunning(b *testing.B, n int) {
	for range 600 {
		if running(d.tool(tokenA, "list_workspaces", map[string]any{})) >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("principal a never had %d calls running", n)
}

// stop sends SIGTERM and waits for the exit.
func (d *benchDaemon) stop(b *testing.B) {
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(120 * time.Second):
		b.Fatal("execd did not stop")
	}
}

// fill makes workspaces prefix0…prefix(n-1), each holding its number in v,
// with 8 clients at once.
func (d *benchDaemon) fill(b *testing.B, prefix string, n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if r := d.call("", fmt.Sprintf("%s%d", prefix, i), "javascript", fmt.Sprintf("var v = %d; v", i)); r != fmt.Sprint(i) {
					select {
					case errs <- fmt.Sprintf("%s%d: %s", prefix, i, r):
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for e := range errs {
		b.Fatal(e)
	}
}

// sample checks that every step-th workspace still has its v, and returns
// how many were checked.
func (d *benchDaemon) sample(b *testing.B, prefix string, n, step int) int {
	checked := 0
	for i := 0; i < n; i += step {
		if r := d.call("", fmt.Sprintf("%s%d", prefix, i), "javascript", "v"); r != fmt.Sprint(i) {
			b.Fatalf("%s%d lost its variable: %s", prefix, i, r)
		}
		checked++
	}
	return checked
}

func (d *benchDaemon) rssMiB(b *testing.B) float64 {
	return float64(rssKiB(b, d.cmd.Process.Pid)) / 1024
}

// BenchmarkIdleWorkspacesMemory makes -idle-workspaces workspaces, each
// holding a variable, with max_workspaces = 100: the rest hibernate. It
// reports the daemon's RSS above the empty daemon's and checks a sample of
// 200 variables.
func BenchmarkIdleWorkspacesMemory(b *testing.B) {
	for b.Loop() {
		data := b.TempDir()
		d := launchBench(b, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[workspace]\ndata_dir = %q\nmax_workspaces = 100\n", data))
		d.call("", "warm", "javascript", "1")
		empty := d.rssMiB(b)
		start := time.Now()
		d.fill(b, "idle", *idleWorkspaces)
		took := time.Since(start)
		full := d.rssMiB(b)
		checked := d.sample(b, "idle", *idleWorkspaces, max(1, *idleWorkspaces/200))
		b.ReportMetric(empty, "empty-rss-MiB")
		b.ReportMetric(full-empty, "rss-above-empty-MiB")
		b.ReportMetric(float64(checked), "sampled-intact")
		b.ReportMetric(ms(took)/float64(*idleWorkspaces), "create-ms/workspace")
		b.ReportMetric(float64(dirSize(data))/float64(*idleWorkspaces), "disk-bytes/workspace")
		b.ReportMetric(0, "ns/op")
		d.stop(b)
	}
}

// BenchmarkRestartWithHibernated stops a daemon with -hibernated-at-restart
// hibernated workspaces, starts it again and reports the time from the
// process start to the first answer (a call to one of them), then checks a
// sample of 100.
func BenchmarkRestartWithHibernated(b *testing.B) {
	for b.Loop() {
		data := b.TempDir()
		toml := fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"60s\"\n[workspace]\ndata_dir = %q\nmax_workspaces = 100\n", data)
		d := launchBench(b, toml)
		d.fill(b, "h", *hibernatedAtRestart)
		stopStart := time.Now()
		d.stop(b)
		stopTook := time.Since(stopStart)
		d2 := launchBench(b, toml)
		if r := d2.call("", "h0", "javascript", "v"); r != "0" {
			b.Fatalf("h0 after the restart: %s", r)
		}
		first := time.Since(d2.start)
		checked := d2.sample(b, "h", *hibernatedAtRestart, max(1, *hibernatedAtRestart/100))
		b.ReportMetric(ms(first), "first-answer-ms")
		b.ReportMetric(ms(stopTook), "stop-ms")
		b.ReportMetric(float64(checked), "sampled-intact")
		b.ReportMetric(0, "ns/op")
		d2.stop(b)
	}
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
