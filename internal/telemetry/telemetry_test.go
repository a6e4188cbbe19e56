package telemetry

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

func testTracer() (*Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	return newTracer(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))), exp
}

func TestRequestSpanContinuesTheCallersTraceAndParentsThePhases(t *testing.T) {
	tr, exp := testTracer()
	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ctx, end := tr.RequestStart(context.Background(), frontend.RequestInfo{Method: "tools/call", Tool: "execute_code",
		Era: frontend.EraModern, Transport: "http", ID: "1", Trace: frontend.TraceContext{Traceparent: "00-" + traceID + "-" + parent + "-01"}})
	tr.Phase(ctx, workspace.PhaseQueue, "python")(workspace.OutcomeOK)
	tr.Phase(ctx, workspace.PhaseRun, "python")("ok")
	end(frontend.RequestEnd{Outcome: "ok"})
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	req := spans[2]
	if req.Name != "tools/call execute_code" || req.SpanContext.TraceID().String() != traceID || req.Parent.SpanID().String() != parent || !req.Parent.IsRemote() {
		t.Errorf("request span %s trace %s parent %s", req.Name, req.SpanContext.TraceID(), req.Parent.SpanID())
	}
	for _, ph := range spans[:2] {
		if ph.Parent.SpanID() != req.SpanContext.SpanID() || ph.SpanContext.TraceID() != req.SpanContext.TraceID() {
			t.Errorf("%s is not a child of the request's span", ph.Name)
		}
	}
	attrs := map[string]string{}
	for _, a := range req.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "execute_code", "execd.era": "modern", "execd.outcome": "ok", "jsonrpc.request.id": "1"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
}

func TestRequestWithoutTraceContextStartsATrace(t *testing.T) {
	tr, exp := testTracer()
	_, end := tr.RequestStart(context.Background(), frontend.RequestInfo{Method: "tools/list", Trace: frontend.TraceContext{Traceparent: "garbage"}})
	end(frontend.RequestEnd{Outcome: "error", Code: -32602})
	s := exp.GetSpans()
	if len(s) != 1 || s[0].Parent.IsValid() || !s[0].SpanContext.TraceID().IsValid() || s[0].Status.Code.String() != "Error" {
		t.Fatalf("spans %+v", s)
	}
}

func TestEnabledFollowsTheEnvironment(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, "")
	}
	if Enabled() {
		t.Error("enabled with no endpoint")
	}
	if tr, err := FromEnv(context.Background(), "v"); tr != nil || err != nil {
		t.Errorf("FromEnv without an endpoint: %v %v", tr, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if !Enabled() {
		t.Error("not enabled with an endpoint")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if Enabled() {
		t.Error("enabled with OTEL_TRACES_EXPORTER=none")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := FromEnv(context.Background(), "v"); err == nil {
		t.Error("grpc accepted")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	tr, err := FromEnv(context.Background(), "v")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv: %v", err)
	}
	_ = tr.Shutdown(context.Background())
}

func TestEgressSpansAreChildrenOfTheRequest(t *testing.T) {
	tr, exp := testTracer()
	ctx, end := tr.RequestStart(context.Background(), frontend.RequestInfo{Method: "tools/call", Tool: "execute_code"})
	_, done := tr.EgressStart(ctx, egress.Start{Method: "GET", Host: "api.example.com", Port: 443})
	done(egress.Done{Outcome: egress.OutcomeAllowed, Status: 200, BytesIn: 5})
	_, done = tr.EgressStart(ctx, egress.Start{Method: "GET", Host: "evil.example", Port: 443})
	done(egress.Done{Outcome: egress.OutcomeRefusedPolicy, Reason: egress.ReasonHost})
	end(frontend.RequestEnd{Outcome: "ok"})
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	ok, refused, req := spans[0], spans[1], spans[2]
	if ok.Name != "execd.egress GET" || ok.Parent.SpanID() != req.SpanContext.SpanID() || ok.SpanKind.String() != "client" {
		t.Errorf("egress span %s kind %s parent %s", ok.Name, ok.SpanKind, ok.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range ok.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["server.address"] != "api.example.com" || attrs["http.response.status_code"] != "200" || attrs["execd.outcome"] != "allowed" {
		t.Errorf("attributes %v", attrs)
	}
	if refused.Status.Code.String() != "Error" {
		t.Errorf("a refused request's span: %v", refused.Status)
	}
}

func TestUpstreamSpansAreChildrenOfTheRequest(t *testing.T) {
	tr, exp := testTracer()
	ctx, end := tr.RequestStart(context.Background(), frontend.RequestInfo{Method: "tools/call", Tool: "execute_code"})
	_, done := tr.UpstreamCall(ctx, upstream.CallInfo{Principal: "local", Upstream: "github", Tool: "create_issue"})
	done(upstream.CallEnd{Outcome: upstream.OutcomeOK})
	_, done = tr.UpstreamCall(ctx, upstream.CallInfo{Upstream: "github", Tool: "delete_repo"})
	done(upstream.CallEnd{Outcome: upstream.CodeRefused})
	end(frontend.RequestEnd{Outcome: "ok"})
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	ok, refused, req := spans[0], spans[1], spans[2]
	if ok.Name != "execd.upstream tools/call" || ok.Parent.SpanID() != req.SpanContext.SpanID() || ok.SpanKind.String() != "client" {
		t.Errorf("upstream span %s kind %s parent %s", ok.Name, ok.SpanKind, ok.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, a := range ok.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["execd.upstream"] != "github" || attrs["gen_ai.tool.name"] != "create_issue" || attrs["execd.outcome"] != "ok" {
		t.Errorf("attributes %v", attrs)
	}
	for k := range attrs {
		if strings.Contains(k, "principal") {
			t.Errorf("a span names the principal: %s", k)
		}
	}
	if ok.Status.Code.String() == "Error" || refused.Status.Code.String() != "Error" {
		t.Errorf("statuses: %v, %v", ok.Status, refused.Status)
	}
}
