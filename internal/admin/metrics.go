package admin

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/tasks"
	"execd/internal/upstream"
	"execd/internal/worker"
	"execd/internal/workspace"
)

// Metrics is execd's Prometheus instrumentation. It observes the front end,
// the workspace registry and the sandboxes (it implements the Observer of
// each), and reads the gauges from Sources when scraped. Every label takes
// a bounded set of values: no workspace id or principal is ever a label.
type Metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.CounterVec
	execDuration  *prometheus.HistogramVec
	queueWait     prometheus.Histogram
	slotWait      prometheus.Histogram
	startDuration *prometheus.HistogramVec
	cancels       *prometheus.CounterVec
	interrupts    *prometheus.CounterVec
	kills         *prometheus.CounterVec
	resets        *prometheus.CounterVec
	hibernations  *prometheus.CounterVec
	restores      *prometheus.CounterVec

	// The network (egress.go).
	egressHosts    map[string]bool // hosts with a label of their own; nil: no host label
	egressRequests *prometheus.CounterVec
	egressBytes    *prometheus.CounterVec
	egressDuration *prometheus.HistogramVec
}

var (
	_ frontend.Observer  = (*Metrics)(nil)
	_ workspace.Observer = (*Metrics)(nil)
	_ worker.Observer    = (*Metrics)(nil)
	_ egress.Observer    = (*Metrics)(nil)
)

// Sources are what the gauges read at each scrape. A nil function leaves
// its gauges out.
type Sources struct {
	Version     string
	Health      func() workspace.Health
	OpenStreams func() int
	// GuestMemory is the sandboxes' linear memory and the engine's budget
	// for it (worker.Engine.MemoryBytes, MemoryBudget).
	GuestMemory func() (used, budget int64)
	// Workspaces counts the workspaces by state.
	Workspaces func() (live, hibernated int)
	// Tasks counts the task records by status (tasks.Store's Counts).
	Tasks func() map[tasks.Status]int
	// EgressHosts are the hosts whose requests are counted under a host
	// label of their own (network.metrics_hosts); the others count as
	// "other". Empty: the egress metrics have no host label.
	EgressHosts []string
	// Upstreams reports code mode's upstream MCP servers
	// (upstream.Hub's Status).
	Upstreams func() []upstream.Status
}

// Durations of runs and waits: from a millisecond to ten minutes.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewMetrics registers execd's metrics, the Go runtime's and the process's
// on a registry of their own.
func NewMetrics(src Sources) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_requests_total",
		Help: "MCP requests answered (or ended without an answer), by method, era, transport and outcome (ok, error, cancelled, undelivered, refused, task: answered with a task that runs on).",
	}, []string{"method", "era", "transport", "outcome"})
	m.execDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execd_execute_code_duration_seconds",
		Help:    "Time execute_code's code ran (not counting waits), by language and result status.",
		Buckets: durationBuckets,
	}, []string{"language", "status"})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "execd_workspace_queue_wait_seconds",
		Help:    "Time calls waited for their workspace's earlier calls.",
		Buckets: durationBuckets,
	})
	m.slotWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "execd_run_slot_wait_seconds",
		Help:    "Time calls waited for a run slot (limits.max_concurrent_runs, limits.max_runs_per_principal).",
		Buckets: durationBuckets,
	})
	m.startDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execd_interpreter_start_seconds",
		Help:    "Time making an interpreter a call needed, by language and how (restored from its image, new, failed).",
		Buckets: durationBuckets,
	}, []string{"language", "outcome"})
	m.cancels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_cancellations_total",
		Help: "Requests stopped before their end, by source: notification (notifications/cancelled), stream_close, session_end, timeout (the run's own deadline), shutdown.",
	}, []string{"source"})
	m.interrupts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_sandbox_interrupts_total",
		Help: "Soft interrupts: a running guest asked to stop, keeping its state.",
	}, []string{"language"})
	m.kills = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_sandbox_kills_total",
		Help: "Hard kills: guests that did not stop within sandbox.interrupt_grace.",
	}, []string{"language"})
	m.resets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_sandbox_resets_total",
		Help: "Interpreter states lost, by language and reason (workspace.ResetReason: killed, crashed, evicted, idle_ttl, reset_by_user, restarted, image_stale, image_corrupt).",
	}, []string{"language", "reason"})
	m.hibernations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_hibernations_total",
		Help: "Interpreters saved to disk and closed.",
	}, []string{"language"})
	m.restores = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_restores_total",
		Help: "Interpreters restored from their image on disk.",
	}, []string{"language"})
	m.registerEgress(src.EgressHosts)
	for _, c := range []prometheus.Collector{m.requests, m.execDuration, m.queueWait, m.slotWait, m.startDuration,
		m.cancels, m.interrupts, m.kills, m.resets, m.hibernations, m.restores,
		m.egressRequests, m.egressBytes, m.egressDuration} {
		f(c)
	}

	if src.Version != "" {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_build_info", Help: "Always 1; the version is a label.",
			ConstLabels: prometheus.Labels{"version": src.Version}}, func() float64 { return 1 }))
	}
	if h := src.Health; h != nil {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_run_slots_busy", Help: "Run slots taken now."},
			func() float64 { return float64(h().RunsInFlight) }))
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_run_slots", Help: "Run slots in all (limits.max_concurrent_runs)."},
			func() float64 { return float64(h().RunSlots) }))
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_live_interpreters", Help: "Interpreters in memory."},
			func() float64 { return float64(h().Live) }))
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "execd_fd_exhaustions_total", Help: "Calls refused because the process was out of file descriptors."},
			func() float64 { return float64(h().FDExhaustions) }))
	}
	if o := src.OpenStreams; o != nil {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_open_streams", Help: "HTTP requests and GET streams open now (server.max_streams_per_principal caps them per principal)."},
			func() float64 { return float64(o()) }))
	}
	if g := src.GuestMemory; g != nil {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_guest_memory_bytes", Help: "Linear memory of all sandboxes, the spares made ahead of need included."},
			func() float64 { u, _ := g(); return float64(u) }))
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "execd_guest_memory_budget_bytes", Help: "The sandboxes' memory budget (limits.max_total_memory_mib)."},
			func() float64 { _, b := g(); return float64(b) }))
	}
	if w := src.Workspaces; w != nil {
		f(workspaceGauge{w})
	}
	if t := src.Tasks; t != nil {
		f(taskGauge{t})
	}
	if u := src.Upstreams; u != nil {
		f(upstreamGauge{u})
	}
	return m
}

// taskGauge is execd_tasks{status}, read at each scrape.
type taskGauge struct{ count func() map[tasks.Status]int }

var tasksDesc = prometheus.NewDesc("execd_tasks",
	"Task records kept, by status: working and input_required (running), completed, failed, cancelled (kept protocol.task_ttl after they ended).",
	[]string{"status"}, nil)

func (g taskGauge) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

func (g taskGauge) Collect(ch chan<- prometheus.Metric) {
	counts := g.count()
	for _, st := range tasks.Statuses {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// Registry is the registry the metrics are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RequestStart implements frontend.Observer: the request is counted at its
// end.
func (m *Metrics) RequestStart(ctx context.Context, r frontend.RequestInfo) (context.Context, func(frontend.RequestEnd)) {
	return ctx, func(e frontend.RequestEnd) {
		m.requests.WithLabelValues(r.Method, r.Era.String(), r.Transport, e.Outcome).Inc()
		if e.Cancel != "" {
			m.cancels.WithLabelValues(e.Cancel).Inc()
		}
	}
}

// Phase implements workspace.Observer.
func (m *Metrics) Phase(_ context.Context, p workspace.Phase, lang string) func(string) {
	start := time.Now()
	return func(outcome string) {
		d := time.Since(start).Seconds()
		switch p {
		case workspace.PhaseQueue:
			m.queueWait.Observe(d)
		case workspace.PhaseSlot:
			m.slotWait.Observe(d)
		case workspace.PhaseStart:
			m.startDuration.WithLabelValues(lang, outcome).Observe(d)
			if outcome == workspace.OutcomeRestored {
				m.restores.WithLabelValues(lang).Inc()
			}
		case workspace.PhaseRun:
			m.execDuration.WithLabelValues(lang, outcome).Observe(d)
			if outcome == string(worker.StatusTimeout) {
				m.cancels.WithLabelValues("timeout").Inc()
			}
		}
	}
}

// StateLost implements workspace.Observer.
func (m *Metrics) StateLost(lang string, reason workspace.ResetReason) {
	m.resets.WithLabelValues(lang, string(reason)).Inc()
}

// Hibernated implements workspace.Observer.
func (m *Metrics) Hibernated(lang string) { m.hibernations.WithLabelValues(lang).Inc() }

// Interrupted implements worker.Observer.
func (m *Metrics) Interrupted(lang string) { m.interrupts.WithLabelValues(lang).Inc() }

// Killed implements worker.Observer.
func (m *Metrics) Killed(lang string) { m.kills.WithLabelValues(lang).Inc() }

// workspaceGauge is execd_workspaces{state}, read at each scrape.
type workspaceGauge struct{ count func() (live, hibernated int) }

var workspacesDesc = prometheus.NewDesc("execd_workspaces",
	"Workspaces by state: live (an interpreter in memory) or hibernated (interpreters saved on disk only). Workspaces with files and no interpreter state are in neither.",
	[]string{"state"}, nil)

func (g workspaceGauge) Describe(ch chan<- *prometheus.Desc) { ch <- workspacesDesc }

func (g workspaceGauge) Collect(ch chan<- prometheus.Metric) {
	live, hib := g.count()
	ch <- prometheus.MustNewConstMetric(workspacesDesc, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(workspacesDesc, prometheus.GaugeValue, float64(hib), "hibernated")
}
