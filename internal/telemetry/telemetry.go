// Package telemetry is execd's OpenTelemetry tracing: one span per MCP
// request, continuing the caller's W3C trace context, with child spans for
// the phases of a call's turn (waiting for the workspace, waiting for a run
// slot, making the interpreter, the run). Spans go to an OTLP/HTTP collector
// configured by the standard OTEL_* environment variables; without an
// endpoint there, nothing is traced and nothing is sent. Spans carry the
// method, tool, era, transport, language and outcome, never code, output,
// arguments, principals or tokens. Each request of sandboxed code is a
// client span (host, port, method, status, outcome, bytes), never its
// path, query or headers; so is each call of an upstream's tool (upstream,
// tool, outcome), never its arguments or its answer.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

// Tracer makes execd's spans. It implements frontend.Observer and
// workspace.Observer (the latter's counters are not its business and do
// nothing).
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var (
	_ frontend.Observer  = (*Tracer)(nil)
	_ workspace.Observer = (*Tracer)(nil)
	_ egress.Observer    = (*Tracer)(nil)
	_ upstream.Observer  = (*Tracer)(nil)
)

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none turns tracing off.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns a Tracer configured by the OTEL_* environment variables,
// or nil when Enabled is false. The exporter reads the endpoint, headers,
// timeout and TLS settings; the SDK reads the sampler (OTEL_TRACES_SAMPLER,
// default parentbased_always_on) and the batching (OTEL_BSP_*); the
// resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the
// service name defaults to "execd"). Only the http/protobuf protocol is
// spoken: another OTEL_EXPORTER_OTLP_PROTOCOL is an error.
func FromEnv(ctx context.Context, version string) (*Tracer, error) {
	if !Enabled() {
		return nil, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(k); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%s: execd exports traces over OTLP/HTTP with protobuf only (http/protobuf)", k, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "execd"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return newTracer(tp), nil
}

func newTracer(tp *sdktrace.TracerProvider) *Tracer {
	return &Tracer{tp: tp, tracer: tp.Tracer("execd"),
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
}

// Shutdown sends the spans still buffered and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// RequestStart implements frontend.Observer: a server span named after the
// method (and tool), child of the caller's trace context when it sent one.
func (t *Tracer) RequestStart(ctx context.Context, r frontend.RequestInfo) (context.Context, func(frontend.RequestEnd)) {
	carrier := propagation.MapCarrier{}
	if r.Trace.Traceparent != "" {
		carrier["traceparent"] = r.Trace.Traceparent
		if r.Trace.Tracestate != "" {
			carrier["tracestate"] = r.Trace.Tracestate
		}
	}
	if r.Trace.Baggage != "" {
		carrier["baggage"] = r.Trace.Baggage
	}
	parent := t.prop.Extract(ctx, carrier)
	name := r.Method
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", r.Method),
		attribute.String("jsonrpc.request.id", r.ID),
		attribute.String("execd.era", r.Era.String()),
		attribute.String("execd.transport", r.Transport),
	}
	if r.Transport == "stdio" {
		attrs = append(attrs, attribute.String("network.transport", "pipe"))
	} else {
		attrs = append(attrs, attribute.String("network.transport", "tcp"))
	}
	if r.Version != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", r.Version))
	}
	if r.Tool != "" {
		name += " " + r.Tool
		attrs = append(attrs, attribute.String("gen_ai.tool.name", r.Tool))
	}
	ctx, span := t.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(r.Start), trace.WithAttributes(attrs...))
	return ctx, func(e frontend.RequestEnd) {
		span.SetAttributes(attribute.String("execd.outcome", e.Outcome))
		if e.Code != 0 {
			span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", e.Code))
		}
		if e.Cancel != "" {
			span.SetAttributes(attribute.String("execd.cancelled_by", e.Cancel))
		}
		switch e.Outcome {
		case "error", "undelivered":
			span.SetStatus(codes.Error, e.Outcome)
		}
		span.End()
	}
}

// Phase implements workspace.Observer: a child span of the request's.
func (t *Tracer) Phase(ctx context.Context, p workspace.Phase, lang string) func(string) {
	_, span := t.tracer.Start(ctx, "execd."+string(p), trace.WithAttributes(attribute.String("execd.language", lang)))
	return func(outcome string) {
		span.SetAttributes(attribute.String("execd.outcome", outcome))
		if outcome == workspace.OutcomeFailed {
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
}

// StateLost implements workspace.Observer; it is not traced.
func (t *Tracer) StateLost(string, workspace.ResetReason) {}

// Hibernated implements workspace.Observer; it is not traced.
func (t *Tracer) Hibernated(string) {}

// EgressStart implements egress.Observer: a client span per request of
// sandboxed code, child of the MCP request's span.
func (t *Tracer) EgressStart(ctx context.Context, r egress.Start) (context.Context, func(egress.Done)) {
	ctx, span := t.tracer.Start(ctx, "execd.egress "+r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("server.address", r.Host),
		attribute.Int("server.port", r.Port)))
	return ctx, func(d egress.Done) {
		span.SetAttributes(attribute.String("execd.outcome", string(d.Outcome)),
			attribute.Int64("execd.egress.bytes_out", d.BytesOut), attribute.Int64("execd.egress.bytes_in", d.BytesIn))
		if d.Status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", d.Status))
		}
		if d.Redirects > 0 {
			span.SetAttributes(attribute.Int("http.request.resend_count", d.Redirects))
		}
		if d.Reason != "" {
			span.SetAttributes(attribute.String("error.type", string(d.Reason)))
			span.SetStatus(codes.Error, string(d.Outcome))
		}
		span.End()
	}
}

// UpstreamCall implements upstream.Observer: a client span per call of an
// upstream's tool by sandboxed code, child of the MCP request's span.
func (t *Tracer) UpstreamCall(ctx context.Context, c upstream.CallInfo) (context.Context, func(upstream.CallEnd)) {
	ctx, span := t.tracer.Start(ctx, "execd.upstream tools/call", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", c.Tool),
		attribute.String("execd.upstream", c.Upstream)))
	return ctx, func(e upstream.CallEnd) {
		span.SetAttributes(attribute.String("execd.outcome", string(e.Outcome)))
		switch e.Outcome {
		case upstream.OutcomeOK:
		case upstream.OutcomeToolError:
			span.SetStatus(codes.Error, string(e.Outcome))
		default:
			span.SetAttributes(attribute.String("error.type", string(e.Outcome)))
			span.SetStatus(codes.Error, string(e.Outcome))
		}
		span.End()
	}
}
