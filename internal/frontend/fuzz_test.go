package frontend

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDecodeHeaderValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "=?base64?SGVsbG8sIOS4lueVjA==?=", want: "Hello, 世界"},
		{in: "  execute_code  ", want: "execute_code"},
		{in: "SGVsbG8=", want: "SGVsbG8="},
		{in: "=?base64?SGVsbG8?=", bad: true},
		{in: "=?base64?SGVs!!!bG8=?=", bad: true},
		{in: "=?base64?/w==?=", bad: true}, // not UTF-8
		{in: "=?BASE64?SGVsbG8=?=", want: "=?BASE64?SGVsbG8=?="},
		{in: "a\x01b", bad: true},
	} {
		got, err := decodeHeaderValue(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("decodeHeaderValue(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"=?base64?SGVsbG8sIOS4lueVjA==?=", "plain", "=?base64??=", " \t=?base64?AA==?= "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		_, _ = decodeHeaderValue(v)
	})
}

func FuzzMeta(f *testing.F) {
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":1}}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}`))
	f.Add([]byte(`{"_meta":null}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		m := readMeta(params)
		if m.claim {
			if e := m.validateModern(); e != nil && e.Code != -32602 {
				t.Fatalf("envelope error with code %d", e.Code)
			}
		}
	})
}

// FuzzHTTP posts arbitrary bodies and headers: every answer must be a
// well-formed HTTP status, never a 500, and any JSON body must be JSON-RPC.
func FuzzHTTP(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`, "2026-07-28", "tools/list", "")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "", "", "")
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_echo","arguments":{"text":"6*7","workspace":"w"},`+modernMeta+`}}`, "2026-07-28", "tools/call", "=?base64?dw==?=")
	f.Add(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "", "")
	s := newTestServer(testOptions())
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body, version, method, wsHeader string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if version != "" {
			req.Header["Mcp-Protocol-Version"] = []string{version}
		}
		if method != "" {
			req.Header["Mcp-Method"] = []string{method}
			req.Header["Mcp-Name"] = []string{"test_echo"}
		}
		if wsHeader != "" {
			req.Header["Mcp-Param-Workspace"] = []string{wsHeader}
		}
		rec := httptest.NewRecorder()
		func() {
			defer func() {
				if r := recover(); r != nil && r != http.ErrAbortHandler {
					t.Fatalf("panic: %v", r)
				}
			}()
			h.ServeHTTP(rec, req)
		}()
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		b, _ := io.ReadAll(rec.Body)
		if rec.Header().Get("Content-Type") == "application/json" && len(b) > 0 {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("invalid JSON answer %q", b)
			}
		}
	})
}
