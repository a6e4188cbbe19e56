package tools

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/mcptest"
	"execd/internal/tasks"
	"execd/internal/workspace"
)

// BenchmarkTasks: 8 clients each make 125 execute_code calls that become
// tasks (runs of 80 ms, protocol.task_after 25 ms) and poll tasks/get
// every 10 ms until each has completed. It fails on a lost or wrong result
// and on a task left working after its run ended, and reports tasks/get's
// p50 and p99 and the heap's growth per task.
func BenchmarkTasks(b *testing.B) {
	const clients, each = 8, 125
	st, err := tasks.Open(tasks.Config{Dir: b.TempDir(), MaxPerPrincipal: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := testOptions()
	cfg.Tasks, cfg.TaskAfter = st, 25*time.Millisecond
	// A run ends 80 ms after it began and once its client holds the task
	// (so that on a loaded machine no run can end before task_after fires
	// and answer the call itself).
	var gates sync.Map // workspace → chan struct{}, closed when its call is a task
	gate := func(ws string) chan struct{} {
		ch, _ := gates.LoadOrStore(ws, make(chan struct{}))
		return ch.(chan struct{})
	}
	ex := &benchExec{onRun: func(ctx context.Context, req workspace.Request) {
		select {
		case <-ctx.Done():
		case <-time.After(80 * time.Millisecond):
		}
		select {
		case <-ctx.Done():
		case <-gate(req.Workspace):
		}
	}}
	s := newTestServer(cfg, ex)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Shutdown(context.Background())

	runtime.GC()
	heap0 := heapBytes()
	var gets []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for n := range b.N {
		var wg sync.WaitGroup
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &mcptest.Client{T: b, URL: ts.URL + "/mcp", Caps: mcptest.TasksCaps()}
				var mine []time.Duration
				for i := range each {
					ws := fmt.Sprintf("w%d-%d-%d", n, w, i) // one gate each
					msg := c.Answer("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": "x", "language": "javascript", "workspace": ws}})
					res, _ := msg["result"].(map[string]any)
					id, _ := res["taskId"].(string)
					close(gate(ws))
					if id == "" {
						b.Errorf("call %s did not become a task: %v", ws, msg)
						return
					}
					for {
						t0 := time.Now()
						got := c.Answer("tasks/get", map[string]any{"taskId": id})
						mine = append(mine, time.Since(t0))
						r, _ := got["result"].(map[string]any)
						if r["status"] == "working" {
							time.Sleep(10 * time.Millisecond)
							continue
						}
						inner, _ := r["result"].(map[string]any)
						sc, _ := inner["structuredContent"].(map[string]any)
						if r["status"] != "completed" || sc["workspace"] != ws || sc["result"] != "2" {
							b.Errorf("task of %s: %v", ws, got)
						}
						break
					}
				}
				mu.Lock()
				gets = append(gets, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	if n := st.Counts()[tasks.Working]; n != 0 {
		b.Errorf("%d tasks still working after their runs ended", n)
	}
	if n := st.Counts()[tasks.Completed]; n != b.N*clients*each {
		b.Errorf("%d tasks completed, want %d", n, b.N*clients*each)
	}
	runtime.GC()
	sort.Slice(gets, func(i, j int) bool { return gets[i] < gets[j] })
	if len(gets) > 0 {
		b.ReportMetric(float64(gets[len(gets)/2].Microseconds()), "µs-get-p50")
		b.ReportMetric(float64(gets[len(gets)*99/100].Microseconds()), "µs-get-p99")
	}
	b.ReportMetric(float64(int64(heapBytes())-int64(heap0))/float64(b.N*clients*each), "heap-B/task")
	b.ReportMetric(float64(rssKiB())/1024, "MiB-RSS")
}

func heapBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rssKiB is the process's resident set (Linux; 0 elsewhere).
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}
