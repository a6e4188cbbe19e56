package admin

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"execd/internal/upstream"
)

// Code mode's upstream MCP servers as the metrics see them, read from
// upstream.Hub's Status at each scrape: whether each is up, its tools, its
// connections and its calls by outcome.
type upstreamGauge struct{ status func() []upstream.Status }

var (
	upstreamUpDesc = prometheus.NewDesc("execd_upstream_up",
		"1 when the upstream MCP server ([[upstream]]) is connected, 0 otherwise (idle: not needed yet; down: it ended or could not be reached, and is tried again at the next need).",
		[]string{"upstream", "transport", "state"}, nil)
	upstreamToolsDesc = prometheus.NewDesc("execd_upstream_tools",
		"Tools the upstream listed on its connection.", []string{"upstream"}, nil)
	upstreamConnectsDesc = prometheus.NewDesc("execd_upstream_connects_total",
		"Connections made to the upstream (a stdio server started, an HTTP session opened).", []string{"upstream"}, nil)
	upstreamCallsDesc = prometheus.NewDesc("execd_upstream_calls_total",
		"Calls of the upstream's tools by sandboxed code, by outcome (ok, tool_error, or why there was no result: limit, timeout, refused, denied, unknown_tool, too_large, unavailable, upstream_error, cancelled, bad_arguments).",
		[]string{"upstream", "outcome"}, nil)
)

func (g upstreamGauge) Describe(ch chan<- *prometheus.Desc) {
	ch <- upstreamUpDesc
	ch <- upstreamToolsDesc
	ch <- upstreamConnectsDesc
	ch <- upstreamCallsDesc
}

func (g upstreamGauge) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g.status() {
		up := 0.0
		if s.State == upstream.StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upstreamUpDesc, prometheus.GaugeValue, up, s.Name, s.Transport, string(s.State))
		ch <- prometheus.MustNewConstMetric(upstreamToolsDesc, prometheus.GaugeValue, float64(s.Tools), s.Name)
		ch <- prometheus.MustNewConstMetric(upstreamConnectsDesc, prometheus.CounterValue, float64(s.Connects), s.Name)
		outcomes := make([]string, 0, len(s.Calls))
		for o := range s.Calls {
			outcomes = append(outcomes, string(o))
		}
		sort.Strings(outcomes)
		for _, o := range outcomes {
			ch <- prometheus.MustNewConstMetric(upstreamCallsDesc, prometheus.CounterValue, float64(s.Calls[upstream.Code(o)]), s.Name, o)
		}
	}
}
