package frontend

import (
	"encoding/json"
	"strings"

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

// requestMeta is what execd reads of a request's params before a handler
// runs, in one pass over params and one over its _meta: the fields that
// routing and the mirrored headers need, and the envelope unjudged.
type requestMeta struct {
	head  paramsHead
	claim bool // _meta has io.modelcontextprotocol/protocolVersion

	// _meta's members, raw (nil when absent).
	version, capabilities, clientInfo, logLevelRaw, progressToken json.RawMessage
	trace                                                         [3]json.RawMessage // traceparent, tracestate, baggage

	// Filled by the era's validation.
	versionStr string
	logLevel   string // "" when absent

	// bad is the -32602 answer to params that cannot be read by key (a
	// key twice); the era's validation reports it.
	bad *jsonrpc.Error
}

// paramsHead is the part of params read before a handler runs: the name
// or uri that Mcp-Name mirrors, a tool call's arguments and task, and the
// cursor of a list.
type paramsHead struct {
	object    bool // params is a JSON object
	meta      json.RawMessage
	name      json.RawMessage
	uri       json.RawMessage
	arguments json.RawMessage
	task      json.RawMessage
	cursor    json.RawMessage
	taskID    json.RawMessage
}

var traceKeys = [3]string{"traceparent", "tracestate", "baggage"}

// readMeta reads params' head and _meta by exact key. A params that is not
// an object, or a _meta that is not an object, yields no claim.
func readMeta(params json.RawMessage) requestMeta {
	var m requestMeta
	if len(params) == 0 || params[0] != '{' {
		return m
	}
	m.head.object = true
	if twice := readFields(params, func(k []byte) *json.RawMessage {
		switch string(k) {
		case "_meta":
			return &m.head.meta
		case "name":
			return &m.head.name
		case "uri":
			return &m.head.uri
		case "arguments":
			return &m.head.arguments
		case "task":
			return &m.head.task
		case "cursor":
			return &m.head.cursor
		case "taskId":
			return &m.head.taskID
		}
		return nil
	}); twice != "" {
		m.bad = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the key %q appears twice in params", twice)
	}
	if !jsonrpc.IsObject(m.head.meta) {
		return m
	}
	if twice := readFields(m.head.meta, func(k []byte) *json.RawMessage {
		switch string(k) {
		case metaVersion:
			return &m.version
		case metaCapabilities:
			return &m.capabilities
		case metaClientInfo:
			return &m.clientInfo
		case metaLogLevel:
			return &m.logLevelRaw
		case "progressToken":
			return &m.progressToken
		case traceKeys[0]:
			return &m.trace[0]
		case traceKeys[1]:
			return &m.trace[1]
		case traceKeys[2]:
			return &m.trace[2]
		}
		return nil
	}); twice != "" && m.bad == nil {
		m.bad = jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the key %q appears twice in _meta", twice)
	}
	m.claim = m.version != nil
	return m
}

// readFields reads the members of the object obj that slot names (it
// returns where each goes, or nil for a member not read), by exact key. It
// returns the first of those keys that appears twice, or "".
func readFields(obj []byte, slot func(key []byte) *json.RawMessage) (twice string) {
	_ = jsonrpc.Object(obj, func(k, v []byte) error {
		p := slot(k)
		if p == nil {
			return nil
		}
		if *p != nil && twice == "" {
			twice = string(k)
		}
		*p = v
		return nil
	})
	return twice
}

// validateModern checks the modern envelope (schema RequestMetaObject):
// required keys present and typed, optional keys typed, logLevel known. It
// fills versionStr and logLevel.
func (m *requestMeta) validateModern() *jsonrpc.Error {
	if m.bad != nil {
		return m.bad
	}
	var missing []string
	if m.version == nil {
		missing = append(missing, metaVersion)
	}
	if m.capabilities == nil {
		missing = append(missing, metaCapabilities)
	}
	if len(missing) > 0 {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing _meta %s", strings.Join(missing, ", "))
	}
	v, ok := jsonrpc.String(m.version)
	if !ok {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be a string", metaVersion)
	}
	m.versionStr = v
	if !jsonrpc.IsObject(m.capabilities) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be an object", metaCapabilities)
	}
	if m.clientInfo != nil && !validClientInfo(m.clientInfo) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be an object with a string name", metaClientInfo)
	}
	if m.logLevelRaw != nil {
		l, ok := jsonrpc.String(m.logLevelRaw)
		if !ok || levelRank(l) < 0 {
			return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be one of %s", metaLogLevel, strings.Join(logLevels, ", "))
		}
		m.logLevel = l
	}
	if jerr := m.validateToken(); jerr != nil {
		return jerr
	}
	for i, raw := range m.trace {
		if raw != nil {
			if _, ok := jsonrpc.String(raw); !ok {
				return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta %s must be a string", traceKeys[i])
			}
		}
	}
	return nil
}

// validateLegacy checks what a legacy request's _meta carries that execd
// reads: the progress token, as strictly as the modern era checks it.
func (m *requestMeta) validateLegacy() *jsonrpc.Error {
	if m.bad != nil {
		return m.bad
	}
	return m.validateToken()
}

// validateToken refuses a progressToken that is neither a string nor an
// integer (schema ProgressToken; basic/utilities/progress.mdx).
func (m *requestMeta) validateToken() *jsonrpc.Error {
	if m.progressToken == nil {
		return nil
	}
	var id jsonrpc.ID
	_ = id.UnmarshalJSON(m.progressToken)
	if !id.Valid() {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: _meta progressToken must be a string or an integer")
	}
	return nil
}

// validClientInfo reports an Implementation object: a string name and, if
// present, a string version.
func validClientInfo(raw json.RawMessage) bool {
	hasName, ok := false, true
	err := jsonrpc.Object(raw, func(k, v []byte) error {
		switch string(k) {
		case "name":
			_, isStr := jsonrpc.String(v)
			hasName, ok = isStr, ok && isStr
		case "version":
			_, isStr := jsonrpc.String(v)
			ok = ok && (isStr || jsonrpc.IsNull(v))
		}
		return nil
	})
	return err == nil && hasName && ok
}

// hasCapability reports whether a modern request declared the client
// capability name in its _meta.
func (m *requestMeta) hasCapability(name string) bool {
	return capability(m.capabilities, name) != nil
}

// capability is the member name of a ClientCapabilities object, or nil.
func capability(caps json.RawMessage, name string) json.RawMessage {
	var found json.RawMessage
	_ = jsonrpc.Object(caps, func(k, v []byte) error {
		if string(k) == name {
			found = v
		}
		return nil
	})
	return found
}

// elicitsForms reports whether ClientCapabilities declare form-mode
// elicitation: "elicitation" with "form", or, as before modes existed, with
// neither "form" nor "url" (docs/specification/2025-11-25/client/elicitation.mdx,
// Capabilities).
func elicitsForms(caps json.RawMessage) bool {
	e := capability(caps, "elicitation")
	if !jsonrpc.IsObject(e) {
		return false
	}
	return capability(e, "form") != nil || capability(e, "url") == nil
}

// validateInitialize checks a legacy initialize's params as strictly as
// the modern envelope is checked (schema InitializeRequestParams): a string
// protocolVersion, an object of capabilities, and clientInfo, when sent, an
// object with a string name. It returns the requested version and the
// client's capabilities.
func validateInitialize(params json.RawMessage) (string, json.RawMessage, *jsonrpc.Error) {
	var version, caps, info json.RawMessage
	if !jsonrpc.IsObject(params) {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: initialize needs params with protocolVersion, capabilities and clientInfo")
	}
	if twice := readFields(params, func(k []byte) *json.RawMessage {
		switch string(k) {
		case "protocolVersion":
			return &version
		case "capabilities":
			return &caps
		case "clientInfo":
			return &info
		}
		return nil
	}); twice != "" {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the key %q appears twice in params", twice)
	}
	v, ok := jsonrpc.String(version)
	if !ok {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: initialize's protocolVersion must be a string")
	}
	if !jsonrpc.IsObject(caps) {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: initialize's capabilities must be an object")
	}
	if info != nil && !validClientInfo(info) {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: initialize's clientInfo must be an object with a string name")
	}
	return v, caps, nil
}

// rawString is a head field as a string; "" when absent or not a string.
func rawString(b json.RawMessage) string {
	s, _ := jsonrpc.String(b)
	return s
}

// versionError is the -32022 answer to an unsupported version.
func versionError(requested string) *jsonrpc.Error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeUnsupportedProtocol,
		Message: "Unsupported protocol version",
		Data:    map[string]any{"supported": allVersions, "requested": requested},
	}
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
