// Package admin is execd's admin listener (server.admin_listen): Prometheus
// metrics at /metrics, a live status page at /status (its data at
// /status.json) and Go's profiles at /debug/pprof/. None of it is served on
// the MCP listener, and none of it has auth: keep the listener on loopback
// or on a network only operators reach.
package admin

import (
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure Handler.
type Options struct {
	// Metrics serves /metrics. Nil leaves it out.
	Metrics *Metrics
	// Status serves /status and /status.json. Nil leaves them out.
	Status *StatusSources
	// Listen is the admin listener's address. On a loopback address a
	// request whose Host is not loopback is refused (a web page's DNS
	// rebinding must not read the status page), as on the MCP listener.
	Listen string
}

// Handler serves the admin endpoints.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	if o.Metrics != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(o.Metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
	if o.Status != nil {
		mux.HandleFunc("/status", servePage)
		mux.HandleFunc("/status.json", o.Status.serveJSON)
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status", http.StatusFound)
	})
	if !loopbackAddr(o.Listen) {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "Forbidden: host "+r.Host+" is not allowed on a loopback admin listener", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// loopbackAddr reports a listen address on a loopback interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return loopbackHost(host)
}

// loopbackHost reports a Host header (with or without a port) naming
// localhost or a loopback address.
func loopbackHost(h string) bool {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
