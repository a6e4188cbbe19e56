package frontend

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"execd/internal/jsonrpc"
)

// Protocol versions.
const (
	VersionModern   = "2026-07-28"
	VersionLatest   = "2025-11-25" // the legacy answer to an unknown version
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

var (
	legacyVersions = []string{VersionLatest, Version20250618, Version20250326}
	modernVersions = []string{VersionModern}
	// allVersions is discover's supportedVersions and every -32022's list.
	allVersions = []string{VersionModern, VersionLatest, Version20250618, Version20250326}
)

// _meta keys of the modern envelope.
const (
	metaVersion      = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo   = "io.modelcontextprotocol/clientInfo"
	metaLogLevel     = "io.modelcontextprotocol/logLevel"
	metaServerInfo   = "io.modelcontextprotocol/serverInfo"
	metaSubscription = "io.modelcontextprotocol/subscriptionId"
)

func isLegacyVersion(v string) bool {
	for _, l := range legacyVersions {
		if v == l {
			return true
		}
	}
	return false
}

func isModernVersion(v string) bool { return v == VersionModern }

// requestMeta is what execd reads of a request's params: _meta, and the
// head fields that routing and validation need, parsed once per request.
type requestMeta struct {
	head          paramsHead
	headOK        bool // params is a JSON object
	present       bool // params._meta is an object
	claim         bool // it has io.modelcontextprotocol/protocolVersion
	version       string
	capabilities  map[string]json.RawMessage
	logLevel      string // "" when absent
	progressToken json.RawMessage
	raw           map[string]json.RawMessage
}

// paramsHead is the part of params read before a handler runs: _meta,
// the name or uri that Mcp-Name mirrors, and a tool call's arguments.
type paramsHead struct {
	Meta      json.RawMessage `json:"_meta"`
	Name      json.RawMessage `json:"name"`
	URI       json.RawMessage `json:"uri"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
}

// rawString is a head field as a string; "" when absent or not a string.
func rawString(b json.RawMessage) string {
	var s string
	_ = json.Unmarshal(b, &s)
	return s
}

// readMeta reads params' head and extracts _meta without judging it. A
// params that is not an object, or a _meta that is not an object, yields no
// claim.
func readMeta(params json.RawMessage) requestMeta {
	var m requestMeta
	if len(params) == 0 || params[0] != '{' {
		return m
	}
	if json.Unmarshal(params, &m.head) != nil {
		return m
	}
	m.headOK = true
	if len(m.head.Meta) == 0 {
		return m
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(m.head.Meta, &raw) != nil || raw == nil {
		return m
	}
	m.present = true
	m.raw = raw
	_, m.claim = raw[metaVersion]
	if tok, ok := raw["progressToken"]; ok {
		m.progressToken = tok
	}
	return m
}

// validateModern checks the modern envelope (MM-1): required keys present
// and typed, optional keys typed, logLevel known. It fills version,
// capabilities and logLevel.
func (m *requestMeta) validateModern() *jsonrpc.Error {
	var missing []string
	if _, ok := m.raw[metaVersion]; !ok {
		missing = append(missing, metaVersion)
	}
	if _, ok := m.raw[metaCapabilities]; !ok {
		missing = append(missing, metaCapabilities)
	}
	if len(missing) > 0 {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing _meta %s", strings.Join(missing, ", "))
	}
	if err := json.Unmarshal(m.raw[metaVersion], &m.version); err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be a string", metaVersion)
	}
	if err := json.Unmarshal(m.raw[metaCapabilities], &m.capabilities); err != nil || m.capabilities == nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be an object", metaCapabilities)
	}
	if ci, ok := m.raw[metaClientInfo]; ok {
		var info struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		}
		if err := json.Unmarshal(ci, &info); err != nil || !isObject(ci) || info.Name == nil {
			return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be an object with a string name", metaClientInfo)
		}
	}
	if ll, ok := m.raw[metaLogLevel]; ok {
		if err := json.Unmarshal(ll, &m.logLevel); err != nil || levelRank(m.logLevel) < 0 {
			return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be one of %s", metaLogLevel, strings.Join(logLevels, ", "))
		}
	}
	if m.progressToken != nil && !validToken(m.progressToken) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta progressToken must be a string or an integer")
	}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := m.raw[k]; ok {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be a string", k)
			}
		}
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// validToken reports whether a progressToken is a string or an integer.
func validToken(b json.RawMessage) bool {
	var id jsonrpc.ID
	_ = id.UnmarshalJSON(b)
	return id.Valid()
}

// versionError is the -32022 answer to an unsupported version.
func versionError(requested string) *jsonrpc.Error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeUnsupportedProtocol,
		Message: "Unsupported protocol version",
		Data:    map[string]any{"supported": allVersions, "requested": requested},
	}
}

// headerError is the -32020 answer to a missing or mismatched header.
func headerError(header, expected, actual string) *jsonrpc.Error {
	msg := "Header mismatch"
	if actual == "" {
		msg = "Missing required header"
	}
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeHeaderMismatch,
		Message: fmt.Sprintf("%s: %s", msg, header),
		Data:    map[string]any{"header": header, "expected": expected, "actual": actual},
	}
}

// decodeHeaderValue turns a mirrored header value into the text it stands
// for: OWS trimmed, and a =?base64?…?= value decoded (strict standard
// base64 of UTF-8). A value without both the prefix and the suffix is
// literal.
func decodeHeaderValue(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") || len(v) < len("=?base64??=") {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
				return "", fmt.Errorf("control character in header value")
			}
		}
		return v, nil
	}
	enc := v[len("=?base64?") : len(v)-len("?=")]
	b, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("invalid base64 in header value: %v", err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("base64 header value is not UTF-8")
	}
	return string(b), nil
}

// Log levels (RFC 5424), least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(l string) int {
	for i, x := range logLevels {
		if x == l {
			return i
		}
	}
	return -1
}
