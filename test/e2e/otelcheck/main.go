// Command otelcheck is the E2E_ONLY=otel step: it runs a loopback OTLP/HTTP
// receiver, starts execd with the standard OTEL_* variables pointing at it,
// sends calls that carry a caller's W3C trace context (in params._meta, in
// the traceparent header, in both), and checks the spans execd exports:
// the request's span continues the caller's trace and parent, the phases of
// the call are its children, and no span carries the code or its output.
//
//	go run ./test/e2e/otelcheck BIN_EXECD
//
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// span is what the checks read of an exported span.
type span struct {
	traceID, spanID, parentID, name, service string
	attrs                                    map[string]string
}

type sink struct {
	mu    sync.Mutex
	spans []span
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans = append(s.spans, convert(sp, service))
			}
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func convert(sp *tracepb.Span, service string) span {
	c := span{traceID: hex.EncodeToString(sp.TraceId), spanID: hex.EncodeToString(sp.SpanId),
		parentID: hex.EncodeToString(sp.ParentSpanId), name: sp.Name, service: service, attrs: map[string]string{}}
	for _, a := range sp.Attributes {
		v := a.Value.GetStringValue()
		if v == "" {
			v = fmt.Sprint(a.Value.GetIntValue())
		}
		c.attrs[a.Key] = v
	}
	return c
}

func (s *sink) inTrace(traceID string) []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []span
	for _, sp := range s.spans {
		if sp.traceID == traceID {
			out = append(out, sp)
		}
	}
	return out
}

func (s *sink) all() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]span(nil), s.spans...)
}

var passed, failed int

func check(name string, err error) {
	if err != nil {
		failed++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	passed++
	fmt.Printf("PASS %s\n", name)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

const marker = "secret-code-marker-7"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: otelcheck BIN_EXECD")
		os.Exit(2)
	}
	s := &sink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = http.Serve(ln, s) }()

	dir, err := os.MkdirTemp("", "execd-otel")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "execd.toml")
	_ = os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"2s\"\n[workspace]\ndata_dir = %q\n", filepath.Join(dir, "data"))), 0o600)
	cmd := exec.Command(os.Args[1], "-config", cfg)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+ln.Addr().String(),
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=execd-e2e")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	urlc := make(chan string, 1)
	var logs bytes.Buffer
	var logMu sync.Mutex
	go func() {
		re := regexp.MustCompile(`listening\s+\{"url": "(http://[^"]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(60 * time.Second):
		fmt.Println("FAIL execd did not start")
		fmt.Println("0 passed, 1 failed")
		os.Exit(1)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	// Modern: the caller's context in params._meta (SEP-414).
	tA, pA := randHex(16), randHex(8)
	_, err = post(url, modernCall("ws-otel", fmt.Sprintf("'%s'.length", marker), map[string]any{"traceparent": "00-" + tA + "-" + pA + "-01"}), nil, "ws-otel")
	check("modern call with _meta traceparent answered", err)
	// Legacy: the caller's context in the HTTP traceparent header.
	tB, pB := randHex(16), randHex(8)
	sid, err := initialize(url)
	if err == nil {
		_, err = post(url, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "execute_code",
			"arguments": map[string]any{"code": "print('" + marker + "')", "language": "python", "workspace": "ws-otel-py"}}},
			map[string]string{"Mcp-Session-Id": sid, "traceparent": "00-" + tB + "-" + pB + "-01"}, "")
	}
	check("legacy call with the traceparent header answered", err)
	// Both: _meta wins over the header.
	tC, pC, tD, pD := randHex(16), randHex(8), randHex(16), randHex(8)
	_, err = post(url, modernCall("ws-otel", "1", map[string]any{"traceparent": "00-" + tD + "-" + pD + "-01"}),
		map[string]string{"traceparent": "00-" + tC + "-" + pC + "-01"}, "ws-otel")
	check("modern call with both answered", err)

	// Spans are exported in batches, so a trace's phases can arrive before
	// its request's span, which ends last: wait for that span in each trace.
	complete := func(traceID string, min int) bool {
		spans := s.inTrace(traceID)
		_, ok := findSpan(spans, "tools/call execute_code")
		return len(spans) >= min && ok
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !(complete(tA, 5) && complete(tB, 5) && complete(tD, 1)) {
		time.Sleep(100 * time.Millisecond)
	}
	check("the modern request's span carries the caller's trace id and parent (from _meta)", requestSpan(s.inTrace(tA), pA, "tools/call execute_code", "modern"))
	check("the legacy request's span carries the caller's trace id and parent (from the header)", requestSpan(s.inTrace(tB), pB, "tools/call execute_code", "legacy"))
	check("_meta's traceparent wins over the header's", func() error {
		if len(s.inTrace(tC)) > 0 {
			return fmt.Errorf("a span joined the header's trace")
		}
		return requestSpan(s.inTrace(tD), pD, "tools/call execute_code", "modern")
	}())
	check("the phases are children of the request's span: queue, slot, start, run", phases(s.inTrace(tA), "javascript"))
	check("python phases too", phases(s.inTrace(tB), "python"))
	check("no span carries the code or its output", func() error {
		for _, sp := range s.all() {
			for k, v := range sp.attrs {
				if strings.Contains(v, marker) {
					return fmt.Errorf("span %s attribute %s = %q", sp.name, k, v)
				}
			}
		}
		return nil
	}())
	if failed > 0 {
		logMu.Lock()
		fmt.Fprint(os.Stderr, logs.String())
		logMu.Unlock()
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func requestSpan(spans []span, parent, name, era string) error {
	sp, ok := findSpan(spans, name)
	if !ok {
		return fmt.Errorf("no %s span in the trace (%d spans: %v)", name, len(spans), names(spans))
	}
	if sp.parentID != parent {
		return fmt.Errorf("span %s has parent %s, want the caller's %s", name, sp.parentID, parent)
	}
	if sp.attrs["execd.era"] != era || sp.attrs["mcp.method.name"] != "tools/call" || sp.attrs["gen_ai.tool.name"] != "execute_code" || sp.attrs["execd.outcome"] != "ok" {
		return fmt.Errorf("span attributes %v", sp.attrs)
	}
	if sp.service != "execd-e2e" {
		return fmt.Errorf("service.name %q, want OTEL_SERVICE_NAME's", sp.service)
	}
	return nil
}

func phases(spans []span, lang string) error {
	var root string
	for _, sp := range spans {
		if strings.HasPrefix(sp.name, "tools/call") {
			root = sp.spanID
		}
	}
	want := map[string]bool{"execd.queue": false, "execd.slot": false, "execd.start": false, "execd.run": false}
	for _, sp := range spans {
		if _, ok := want[sp.name]; ok {
			if sp.parentID != root {
				return fmt.Errorf("%s's parent is %s, not the request's span %s", sp.name, sp.parentID, root)
			}
			if sp.attrs["execd.language"] != lang {
				return fmt.Errorf("%s: language %q", sp.name, sp.attrs["execd.language"])
			}
			want[sp.name] = true
		}
	}
	for n, seen := range want {
		if !seen {
			return fmt.Errorf("no %s span (have %v)", n, names(spans))
		}
	}
	return nil
}

// findSpan is the first span of that name.
func findSpan(spans []span, name string) (span, bool) {
	for _, sp := range spans {
		if sp.name == name {
			return sp, true
		}
	}
	return span{}, false
}

func names(spans []span) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.name)
	}
	return out
}

func modernCall(ws, code string, meta map[string]any) map[string]any {
	m := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	for k, v := range meta {
		m[k] = v
	}
	return map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "execute_code",
		"arguments": map[string]any{"code": code, "language": "javascript", "workspace": ws}, "_meta": m}}
}

func initialize(url string) (string, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "otelcheck", "version": "1"}}})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		return "", fmt.Errorf("initialize: HTTP %d", resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

// post sends a JSON-RPC request and returns the body; a modern one gets the
// mirrored headers (workspace names Mcp-Param-Workspace).
func post(url string, msg map[string]any, hdr map[string]string, workspace string) (string, error) {
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if workspace != "" {
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "execute_code")
		req.Header.Set("Mcp-Param-Workspace", workspace)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"structuredContent":{"status":"ok"`)) {
		return string(body), fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)
	}
	return string(body), nil
}
