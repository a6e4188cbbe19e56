package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/workspace"
)

func testMetrics() *Metrics {
	return NewMetrics(Sources{
		Version:     "1.2.3",
		Health:      func() workspace.Health { return workspace.Health{RunsInFlight: 1, RunSlots: 4, Live: 2} },
		OpenStreams: func() int { return 3 },
		GuestMemory: func() (int64, int64) { return 5 << 20, 100 << 20 },
		Workspaces:  func() (int, int) { return 2, 7 },
	})
}

func TestMetricsCountWhatTheObserversAreTold(t *testing.T) {
	m := testMetrics()
	ctx := context.Background()
	_, end := m.RequestStart(ctx, frontend.RequestInfo{Method: "tools/call", Tool: "execute_code", Era: frontend.EraModern, Transport: "http"})
	end(frontend.RequestEnd{Outcome: "cancelled", Cancel: "stream_close"})
	_, end = m.RequestStart(ctx, frontend.RequestInfo{Method: "tools/list", Era: frontend.EraLegacy, Transport: "stdio"})
	end(frontend.RequestEnd{Outcome: "ok"})
	m.Phase(ctx, workspace.PhaseRun, "python")("timeout")
	m.Phase(ctx, workspace.PhaseStart, "python")(workspace.OutcomeRestored)
	m.Phase(ctx, workspace.PhaseQueue, "python")(workspace.OutcomeOK)
	m.StateLost("python", workspace.ReasonKilled)
	m.Hibernated("javascript")
	m.Interrupted("python")
	m.Killed("python")

	for name, c := range map[string]float64{
		`execd_requests_total{era="modern",method="tools/call",outcome="cancelled",transport="http"}`: testutil.ToFloat64(m.requests.WithLabelValues("tools/call", "modern", "http", "cancelled")),
		`execd_requests_total{era="legacy",method="tools/list",outcome="ok",transport="stdio"}`:       testutil.ToFloat64(m.requests.WithLabelValues("tools/list", "legacy", "stdio", "ok")),
		`execd_cancellations_total{source="stream_close"}`:                                            testutil.ToFloat64(m.cancels.WithLabelValues("stream_close")),
		`execd_cancellations_total{source="timeout"}`:                                                 testutil.ToFloat64(m.cancels.WithLabelValues("timeout")),
		`execd_restores_total{language="python"}`:                                                     testutil.ToFloat64(m.restores.WithLabelValues("python")),
		`execd_sandbox_resets_total{language="python",reason="killed"}`:                               testutil.ToFloat64(m.resets.WithLabelValues("python", "killed")),
		`execd_hibernations_total{language="javascript"}`:                                             testutil.ToFloat64(m.hibernations.WithLabelValues("javascript")),
		`execd_sandbox_interrupts_total{language="python"}`:                                           testutil.ToFloat64(m.interrupts.WithLabelValues("python")),
		`execd_sandbox_kills_total{language="python"}`:                                                testutil.ToFloat64(m.kills.WithLabelValues("python")),
	} {
		if c != 1 {
			t.Errorf("%s = %v, want 1", name, c)
		}
	}
	if n := testutil.CollectAndCount(m.execDuration); n != 1 {
		t.Errorf("execute_code histograms: %d series, want 1 (python, timeout)", n)
	}
	want := `
# HELP execd_workspaces Workspaces by state: live (an interpreter in memory) or hibernated (interpreters saved on disk only). Workspaces with files and no interpreter state are in neither.
# TYPE execd_workspaces gauge
execd_workspaces{state="hibernated"} 7
execd_workspaces{state="live"} 2
# HELP execd_run_slots_busy Run slots taken now.
# TYPE execd_run_slots_busy gauge
execd_run_slots_busy 1
# HELP execd_open_streams HTTP requests and GET streams open now (server.max_streams_per_principal caps them per principal).
# TYPE execd_open_streams gauge
execd_open_streams 3
# HELP execd_guest_memory_bytes Linear memory of all sandboxes, the spares made ahead of need included.
# TYPE execd_guest_memory_bytes gauge
execd_guest_memory_bytes 5.24288e+06
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "execd_workspaces", "execd_run_slots_busy", "execd_open_streams", "execd_guest_memory_bytes"); err != nil {
		t.Error(err)
	}
}

// Every metric follows Prometheus' naming rules (promlint), and the Go
// runtime's and the process's collectors are there.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	m := testMetrics()
	m.Phase(context.Background(), workspace.PhaseRun, "javascript")("ok")
	problems, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "execd_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	mfs, _ := m.reg.Gather()
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, n := range []string{"go_goroutines", "process_resident_memory_bytes", "execd_build_info", "execd_guest_memory_budget_bytes", "execd_run_slots"} {
		if !have[n] {
			t.Errorf("no %s", n)
		}
	}
}

func TestRecentErrorsKeepsTheNewestFirst(t *testing.T) {
	r := NewRecentErrors(3)
	log := zap.New(r.Core()).With(zap.String("workspace", "w"))
	log.Info("not kept")
	for _, m := range []string{"one", "two", "three", "four"} {
		log.Warn(m, zap.Int("n", len(m)))
	}
	got := r.List()
	if len(got) != 3 || got[0].Message != "four" || got[2].Message != "two" {
		t.Fatalf("entries %+v", got)
	}
	if got[0].Fields["workspace"] != "w" || got[0].Fields["n"] != "4" || got[0].Level != "warn" {
		t.Errorf("fields %+v", got[0])
	}
}

func TestHandlerServesStatusAndRefusesForeignHosts(t *testing.T) {
	errs := NewRecentErrors(0)
	errs.Add(ErrorEntry{Time: time.Now(), Level: "error", Message: "boom"})
	st := &StatusSources{
		Version: "1.2.3", Started: time.Now().Add(-time.Minute), Limits: []Limit{{"limits.max_concurrent_runs", "4"}},
		Calls: func() []frontend.RunningCall {
			return []frontend.RunningCall{{ID: "7", Method: "tools/call", Tool: "execute_code", Principal: "alice", Tags: map[string]string{"workspace": "w"}, Started: time.Now(), Progress: "3/10 rows"}}
		},
		Workspaces: &WorkspaceView{List: func() []workspace.Info {
			return []workspace.Info{{Principal: "alice", ID: "w", Languages: []string{"python"}, Live: true, MemoryBytes: 1 << 20}, {Principal: "bob", ID: "h", Hibernated: true}}
		}},
		Errors: errs,
		Network: func() []egress.WorkspaceRequests {
			return []egress.WorkspaceRequests{{Principal: "alice", Workspace: "w", Requests: []egress.Entry{{Method: "GET", Host: "api.example.com", Status: 200, Outcome: egress.OutcomeAllowed}}}}
		},
	}
	h := Handler(Options{Metrics: testMetrics(), Status: st, Listen: "127.0.0.1:9090"})
	get := func(path, host string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := get("/status.json", "127.0.0.1:9090")
	var doc struct {
		Version    string
		Calls      []map[string]any
		Workspaces []map[string]any
		Errors     []map[string]any
		Network    []egress.WorkspaceRequests
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err, w.Body.String())
	}
	if doc.Version != "1.2.3" || len(doc.Calls) != 1 || doc.Calls[0]["progress"] != "3/10 rows" ||
		len(doc.Workspaces) != 2 || doc.Workspaces[0]["state"] != "live" || doc.Workspaces[1]["state"] != "hibernated" || len(doc.Errors) != 1 ||
		len(doc.Network) != 1 || doc.Network[0].Requests[0].Host != "api.example.com" {
		t.Errorf("status.json %s", w.Body.String())
	}
	page := get("/status", "localhost:9090")
	body, _ := io.ReadAll(page.Body)
	if page.Code != 200 || !strings.Contains(string(body), "status.json") || strings.Contains(string(body), "http") && strings.Contains(string(body), "src=\"http") {
		t.Errorf("status page: %d", page.Code)
	}
	if w := get("/metrics", "[::1]:9090"); w.Code != 200 || !strings.Contains(w.Body.String(), "execd_build_info") {
		t.Errorf("/metrics: %d", w.Code)
	}
	if w := get("/debug/pprof/", "127.0.0.1"); w.Code != 200 {
		t.Errorf("/debug/pprof/: %d", w.Code)
	}
	if w := get("/status.json", "evil.example:9090"); w.Code != http.StatusForbidden {
		t.Errorf("foreign host: %d", w.Code)
	}
	open := Handler(Options{Status: st, Listen: "0.0.0.0:9090"})
	r := httptest.NewRequest(http.MethodGet, "/status.json", nil)
	r.Host = "execd-0.monitoring:9090"
	rw := httptest.NewRecorder()
	open.ServeHTTP(rw, r)
	if rw.Code != 200 {
		t.Errorf("a non-loopback listener refused its host: %d", rw.Code)
	}
}

// TestEgressMetrics: requests by outcome and bytes by direction, with a
// host label only for the hosts the operator lists.
func TestEgressMetrics(t *testing.T) {
	ctx := context.Background()
	m := testMetrics()
	_, end := m.EgressStart(ctx, egress.Start{Host: "api.example.com"})
	end(egress.Done{Outcome: egress.OutcomeAllowed, BytesOut: 100, BytesIn: 2000})
	_, end = m.EgressStart(ctx, egress.Start{Host: "evil.example"})
	end(egress.Done{Outcome: egress.OutcomeRefusedPolicy})
	want := `
# HELP execd_egress_requests_total Requests of sandboxed code, by outcome: allowed (a response came back), refused_policy (the allow list, a secret or a limit), refused_address (the dialer's address check), error (failed, timed out or aborted).
# TYPE execd_egress_requests_total counter
execd_egress_requests_total{outcome="allowed"} 1
execd_egress_requests_total{outcome="refused_policy"} 1
# HELP execd_egress_bytes_total Bytes of sandboxed code's requests, by direction: out (request lines, headers and bodies sent), in (response bodies received).
# TYPE execd_egress_bytes_total counter
execd_egress_bytes_total{direction="in"} 2000
execd_egress_bytes_total{direction="out"} 100
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "execd_egress_requests_total", "execd_egress_bytes_total"); err != nil {
		t.Error(err)
	}
	hm := NewMetrics(Sources{EgressHosts: []string{"api.example.com"}})
	for _, h := range []string{"api.example.com", "evil.example", "other.example"} {
		_, end := hm.EgressStart(ctx, egress.Start{Host: h})
		end(egress.Done{Outcome: egress.OutcomeAllowed, BytesIn: 1})
	}
	if a, o := testutil.ToFloat64(hm.egressRequests.WithLabelValues("allowed", "api.example.com")), testutil.ToFloat64(hm.egressRequests.WithLabelValues("allowed", "other")); a != 1 || o != 2 {
		t.Errorf("listed host %v, others %v", a, o)
	}
}
