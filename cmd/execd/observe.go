package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/admin"
	"execd/internal/config"
	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/telemetry"
	"execd/internal/workspace"
)

// observers are what watches execd when the admin listener or tracing is
// on: the Prometheus metrics and the status page (internal/admin), the
// tracer (internal/telemetry). Either may be nil.
type observers struct {
	metrics *admin.Metrics
	tracer  *telemetry.Tracer
	errors  *admin.RecentErrors
}

// forFrontend is the front end's Observer: nil when nothing observes.
func (o observers) forFrontend() frontend.Observer {
	var list frontendFanout
	if o.metrics != nil {
		list = append(list, o.metrics)
	}
	if o.tracer != nil {
		list = append(list, o.tracer)
	}
	if o.errors != nil {
		list = append(list, requestErrors{o.errors})
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// forWorkspaces is the workspace registry's Observer: nil when nothing
// observes.
func (o observers) forWorkspaces() workspace.Observer {
	var list workspaceFanout
	if o.metrics != nil {
		list = append(list, o.metrics)
	}
	if o.tracer != nil {
		list = append(list, o.tracer)
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// forEgress is the network's Observer: nil when nothing observes.
func (o observers) forEgress() egress.Observer {
	var list egressFanout
	if o.metrics != nil {
		list = append(list, o.metrics)
	}
	if o.tracer != nil {
		list = append(list, o.tracer)
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// egressFanout reports every request of sandboxed code to each observer.
type egressFanout []egress.Observer

func (f egressFanout) EgressStart(ctx context.Context, r egress.Start) (context.Context, func(egress.Done)) {
	ends := make([]func(egress.Done), len(f))
	for i, o := range f {
		ctx, ends[i] = o.EgressStart(ctx, r)
	}
	return ctx, func(d egress.Done) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](d)
		}
	}
}

// frontendFanout reports every request to each observer in turn; each
// one's context is the next one's parent.
type frontendFanout []frontend.Observer

func (f frontendFanout) RequestStart(ctx context.Context, r frontend.RequestInfo) (context.Context, func(frontend.RequestEnd)) {
	ends := make([]func(frontend.RequestEnd), len(f))
	for i, o := range f {
		ctx, ends[i] = o.RequestStart(ctx, r)
	}
	return ctx, func(e frontend.RequestEnd) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](e)
		}
	}
}

type workspaceFanout []workspace.Observer

func (f workspaceFanout) Phase(ctx context.Context, p workspace.Phase, lang string) func(string) {
	ends := make([]func(string), len(f))
	for i, o := range f {
		ends[i] = o.Phase(ctx, p, lang)
	}
	return func(outcome string) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i](outcome)
		}
	}
}

func (f workspaceFanout) StateLost(lang string, r workspace.ResetReason) {
	for _, o := range f {
		o.StateLost(lang, r)
	}
}

func (f workspaceFanout) Hibernated(lang string) {
	for _, o := range f {
		o.Hibernated(lang)
	}
}

// requestErrors puts the requests that end with a JSON-RPC error among the
// status page's recent errors.
type requestErrors struct{ r *admin.RecentErrors }

func (q requestErrors) RequestStart(ctx context.Context, ri frontend.RequestInfo) (context.Context, func(frontend.RequestEnd)) {
	return ctx, func(e frontend.RequestEnd) {
		if e.Outcome != "error" {
			return
		}
		q.r.Add(admin.ErrorEntry{Time: time.Now(), Level: "error", Logger: "mcp", Message: "request failed",
			Fields: map[string]string{"method": ri.Method, "tool": ri.Tool, "code": strconv.Itoa(e.Code), "era": ri.Era.String()}})
	}
}

// limitsShown are the configuration values the status page lists.
func limitsShown(cfg config.Config, budget int64) []admin.Limit {
	l := func(k string, v any) admin.Limit { return admin.Limit{Key: k, Value: toText(v)} }
	return []admin.Limit{
		l("limits.max_concurrent_runs", cfg.Limits.MaxConcurrentRuns),
		l("limits.max_runs_per_principal", cfg.Limits.MaxRunsPerPrincipal),
		l("limits.max_memory_mib", cfg.Limits.MaxMemoryMiB),
		l("guest memory budget (MiB)", budget>>20),
		l("limits.request_timeout", cfg.Limits.RequestTimeout.Duration),
		l("limits.max_output_bytes", cfg.Limits.MaxOutputBytes),
		l("workspace.max_workspaces", cfg.Workspace.MaxWorkspaces),
		l("workspace.max_disk_mib", cfg.Workspace.MaxDiskMiB),
		l("workspace.hibernate_after", cfg.Workspace.HibernateAfter.Duration),
		l("workspace.idle_ttl", cfg.Workspace.IdleTTL.Duration),
		l("server.max_streams_per_principal", cfg.Server.MaxStreams),
		l("sandbox.interrupt_grace", cfg.Sandbox.InterruptGrace.Duration),
		{Key: "network.allow", Value: allowShown(cfg.Network)},
		l("network.max_requests_per_run", cfg.Network.MaxRequestsPerRun),
		l("network.max_response_bytes", cfg.Network.MaxResponseBytes),
		l("network.request_timeout", cfg.Network.RequestTimeout.Duration),
		l("network.bytes_per_minute", cfg.Network.BytesPerMinute),
	}
}

// allowShown is the default allow list as the status page shows it (the
// principals' own lists are counted, not listed; secrets never appear).
func allowShown(n config.Network) string {
	s := "none (no network)"
	if len(n.Allow) > 0 {
		s = strings.Join(n.Allow, ", ")
	}
	if len(n.Principals) > 0 {
		s += fmt.Sprintf("; %d principal(s) with a list of their own", len(n.Principals))
	}
	return s
}

func toText(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case time.Duration:
		if x == 0 {
			return "0 (none)"
		}
		return x.String()
	}
	return ""
}

// serveAdmin serves the admin endpoints on their own listener
// (server.admin_listen) until the process ends.
func serveAdmin(addr string, h http.Handler, log *zap.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Info("admin listener", zap.String("url", "http://"+ln.Addr().String()+"/"))
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log)}
	go func() { _ = hs.Serve(ln) }()
	return nil
}
