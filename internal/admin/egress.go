package admin

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"execd/internal/egress"
)

// The network's metrics: the requests of sandboxed code by outcome
// (egress.Outcome: allowed, refused_policy, refused_address, error), the
// bytes in and out, and the time requests took. A host is a label only
// when the operator lists it (network.metrics_hosts): host names come
// from the code.

func (m *Metrics) registerEgress(hosts []string) {
	labels := []string{"outcome"}
	bytesLabels := []string{"direction"}
	if len(hosts) > 0 {
		m.egressHosts = map[string]bool{}
		for _, h := range hosts {
			m.egressHosts[h] = true
		}
		labels = append(labels, "host")
		bytesLabels = append(bytesLabels, "host")
	}
	m.egressRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_egress_requests_total",
		Help: "Requests of sandboxed code, by outcome: allowed (a response came back), refused_policy (the allow list, a secret or a limit), refused_address (the dialer's address check), error (failed, timed out or aborted).",
	}, labels)
	m.egressBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "execd_egress_bytes_total",
		Help: "Bytes of sandboxed code's requests, by direction: out (request lines, headers and bodies sent), in (response bodies received).",
	}, bytesLabels)
	m.egressDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "execd_egress_request_duration_seconds",
		Help:    "Time requests of sandboxed code took, redirects and bodies included, by outcome.",
		Buckets: durationBuckets,
	}, []string{"outcome"})
}

// EgressStart implements egress.Observer: the request is counted at its
// end.
// A request's host is that of its URL, whatever host its redirects reached.
func (m *Metrics) EgressStart(ctx context.Context, st egress.Start) (context.Context, func(egress.Done)) {
	return ctx, func(d egress.Done) {
		out := string(d.Outcome)
		if m.egressHosts == nil {
			m.egressRequests.WithLabelValues(out).Inc()
			m.egressBytes.WithLabelValues("out").Add(float64(d.BytesOut))
			m.egressBytes.WithLabelValues("in").Add(float64(d.BytesIn))
		} else {
			host := "other"
			if m.egressHosts[st.Host] {
				host = st.Host
			}
			m.egressRequests.WithLabelValues(out, host).Inc()
			m.egressBytes.WithLabelValues("out", host).Add(float64(d.BytesOut))
			m.egressBytes.WithLabelValues("in", host).Add(float64(d.BytesIn))
		}
		m.egressDuration.WithLabelValues(out).Observe(d.Duration.Seconds())
	}
}
