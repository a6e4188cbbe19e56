package frontend

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"execd/internal/jsonrpc"
)

// Observer watches the requests a Server serves, for metrics and traces
// (cmd/execd wires internal/admin and internal/telemetry). Its methods are
// called on the request's goroutine and must not block.
type Observer interface {
	// RequestStart is called when a request has been admitted, before it
	// runs; a request answered without running (a refusal, the legacy
	// handshake) is started and ended at once. It returns the context the
	// request runs with, derived from ctx (a tracer carries its span
	// there), and the function its end is reported to, exactly once.
	RequestStart(ctx context.Context, r RequestInfo) (context.Context, func(RequestEnd))
}

// RequestInfo is what is known of a request when it starts. Every field
// takes a bounded set of values, except ID and Trace.
type RequestInfo struct {
	// Method is the JSON-RPC method when the server serves it (or it is
	// initialize), "other" otherwise.
	Method string
	// Tool is, for tools/call, the tool's name when the server offers it,
	// "other" otherwise; "" for other methods.
	Tool      string
	Era       Era
	Transport string // "http" or "stdio"
	Version   string // the protocol version; "" before it is known
	ID        string // the JSON-RPC id, as text
	Start     time.Time
	// Trace is the caller's W3C trace context: params._meta's
	// traceparent, tracestate and baggage (SEP-414), or else, when _meta
	// has no traceparent, the HTTP request's headers of the same names.
	Trace TraceContext
}

// TraceContext is a W3C trace context as text; empty fields were absent.
type TraceContext struct{ Traceparent, Tracestate, Baggage string }

// RequestEnd is how a request ended.
type RequestEnd struct {
	// Outcome is the status of the request's log line: "ok", "error" (a
	// JSON-RPC error), "cancelled" (the client no longer wanted the answer:
	// nothing was written), "undelivered" (the answer could not be
	// written) or "refused" (answered without running).
	Outcome string
	// Code is the JSON-RPC error code of an error or a refusal; 0 otherwise.
	Code int
	// Cancel says what ended the request's context before it answered:
	// "notification" (notifications/cancelled), "stream_close" (the
	// client closed the response stream or stdin), "session_end" (its
	// legacy session was deleted or expired) or "shutdown"; "" when
	// nothing did. A run stopped by its own timeout is not among them
	// (workspace.PhaseRun's outcome says timeout).
	Cancel string
	// Duration is the time from RequestStart to the end.
	Duration time.Duration
}

type nopObserver struct{}

func (nopObserver) RequestStart(ctx context.Context, _ RequestInfo) (context.Context, func(RequestEnd)) {
	return ctx, func(RequestEnd) {}
}

// cancelSource names the cause that ended a request's context (see
// RequestEnd.Cancel).
func cancelSource(ctx context.Context) string {
	switch c := context.Cause(ctx); {
	case c == nil:
		return ""
	case errors.Is(c, errClientCancel):
		return "notification"
	case errors.Is(c, errClientGone):
		return "stream_close"
	case errors.Is(c, errSessionEnded):
		return "session_end"
	case errors.Is(c, ErrShutdown):
		return "shutdown"
	}
	return ""
}

// requestInfo describes msg for the Observer.
func (s *Server) requestInfo(o origin, era Era, version string, msg *jsonrpc.Message, meta *requestMeta, c *Call) RequestInfo {
	src := o.src()
	ri := RequestInfo{Method: "other", Era: era, Transport: src.transport, Version: version, ID: msg.ID.String(), Start: time.Now()}
	if m, ok := s.table[msg.Method]; ok && (m.when == nil || m.when()) || msg.Method == "initialize" {
		ri.Method = msg.Method
	}
	if msg.Method == "tools/call" {
		ri.Tool = "other"
		if c != nil && c.tool != nil {
			ri.Tool = c.tool.name
		}
	}
	if meta != nil && meta.trace[0] != nil {
		ri.Trace.Traceparent = rawString(meta.trace[0])
		ri.Trace.Tracestate = rawString(meta.trace[1])
		ri.Trace.Baggage = rawString(meta.trace[2])
	} else if h := src.header; h != nil {
		// Canonical keys: Get copies any other spelling into a new string.
		ri.Trace = TraceContext{h.Get("Traceparent"), h.Get("Tracestate"), h.Get("Baggage")}
	}
	return ri
}

// observeReply reports a request answered without running.
func (s *Server) observeReply(o origin, a admission, msg *jsonrpc.Message, meta *requestMeta, r *reply) {
	ri := s.requestInfo(o, a.era, a.version, msg, meta, nil)
	_, end := s.obs.RequestStart(context.Background(), ri)
	e := RequestEnd{Outcome: "ok", Duration: time.Since(ri.Start)}
	if r.err != nil {
		e.Outcome, e.Code = "refused", r.err.Code
	}
	end(e)
}

// RunningCall is one request in flight, for an operator's view (the admin
// listener's status page).
type RunningCall struct {
	ID        string
	Method    string
	Tool      string // tools/call: the tool's name
	Era       Era
	Transport string
	Principal string
	// Tags are what the handler said the call acts on (Call.Tag), as key,
	// value pairs: execd's tools name the workspace and language.
	Tags    map[string]string
	Started time.Time
	// Progress is the run's latest progress message (the guest's
	// progress() or execd's own, such as "queued: ..."), whether or not
	// the client asked for progress; "" before the first.
	Progress string
}

// running is the registry of requests in flight behind Server.Running.
type running struct {
	mu sync.Mutex
	m  map[*task]struct{}
}

func (r *running) add(t *task) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[*task]struct{}{}
	}
	r.m[t] = struct{}{}
	r.mu.Unlock()
}

func (r *running) remove(t *task) {
	r.mu.Lock()
	delete(r.m, t)
	r.mu.Unlock()
}

// Running lists the requests in flight, oldest first. It only reads.
func (s *Server) Running() []RunningCall {
	s.running.mu.Lock()
	out := make([]RunningCall, 0, len(s.running.m))
	for t := range s.running.m {
		c := t.c
		rc := RunningCall{ID: c.id.String(), Method: c.method, Era: c.era, Transport: c.transport,
			Principal: c.principal, Started: t.start}
		if c.tool != nil {
			rc.Tool = c.tool.name
		}
		if tags := c.tagged(); len(tags) > 0 {
			rc.Tags = make(map[string]string, len(tags)/2)
			for i := 0; i+1 < len(tags); i += 2 {
				rc.Tags[tags[i]] = tags[i+1]
			}
		}
		if p := c.progress.Load(); p != nil {
			rc.Progress = *p
		}
		out = append(out, rc)
	}
	s.running.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// OpenStreams is how many HTTP requests and GET streams are open now: the
// count Options.MaxStreamsPerPrincipal caps, summed over principals.
func (s *Server) OpenStreams() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	n := 0
	for _, k := range s.streams.open {
		n += k
	}
	return n
}

// TaskInfo is one task, for an operator's view (the status page).
type TaskInfo struct {
	// ID is the start of the task's id: enough to tell tasks apart, too
	// little to name one on the wire.
	ID        string
	Principal string
	Tool      string
	Workspace string
	Status    string
	// Message is the run's latest progress while it runs here, else what
	// the record says.
	Message string
	Created time.Time
	Updated time.Time
	// Running: the task's run is in this process.
	Running bool
}

// Tasks lists the n tasks updated last, every principal's, newest first
// (n <= 0: all); none without Options.Tasks. It only reads.
func (s *Server) Tasks(n int) []TaskInfo {
	if s.opts.Tasks == nil {
		return nil
	}
	recs := s.opts.Tasks.Recent(n)
	out := make([]TaskInfo, len(recs))
	for i, rec := range recs {
		lt := s.live.get(rec.Principal, rec.ID)
		ti := TaskInfo{ID: rec.ID[:min(8, len(rec.ID))], Principal: rec.Principal, Tool: rec.Tool, Workspace: rec.Tags["workspace"],
			Status: string(rec.Status), Message: rec.Message, Created: rec.Created, Updated: rec.Updated, Running: lt != nil}
		if rec.Stopped {
			ti.Message = stoppedMessage
		}
		if lt != nil && !rec.Status.Terminal() {
			if p := lt.c.progressMessage(); p != "" {
				ti.Message = p
			}
		}
		out[i] = ti
	}
	return out
}
