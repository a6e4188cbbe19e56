// Package jsonrpc decodes and encodes JSON-RPC 2.0 messages as MCP uses
// them: one object per message (batches are split by the caller), ids that
// keep their exact JSON text, and errors that carry a code and optional
// data. Decoding is one pass over the bytes (internal/jsonscan); keys are matched
// exactly, and a key that appears twice is refused rather than letting the
// last one win, so that execd never reads a message differently from a
// proxy or a log that reads the first.
package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strconv"

	"execd/internal/jsonscan"
)

// Standard and MCP error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeServerPolicy is execd's transport-policy code (bad Origin, missing
	// session, bad legacy version header), as the TypeScript SDK uses it.
	CodeServerPolicy = -32000
	// CodeSessionNotFound answers an unknown, expired or deleted session.
	CodeSessionNotFound = -32001

	// Modern-era codes (schema 2026-07-28).
	CodeHeaderMismatch      = -32020
	CodeMissingCapability   = -32021
	CodeUnsupportedProtocol = -32022
)

// ID is a request id kept as its exact JSON text, so that it is echoed as
// it came: 3 stays 3, "3" stays "3" and 1E2 stays 1E2. The zero ID is
// absent; NullID is JSON null.
type ID struct{ raw json.RawMessage }

// NullID is the id of an error answering a message whose id is unknown.
var NullID = ID{raw: json.RawMessage("null")}

// NewStringID returns a string id.
func NewStringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: b}
}

// IsZero reports whether the id is absent (a notification).
func (id ID) IsZero() bool { return len(id.raw) == 0 }

// IsNull reports whether the id is JSON null.
func (id ID) IsNull() bool { return string(id.raw) == "null" }

// Valid reports whether the id is a string or an integer, as MCP requires
// (spec: docs/specification/2025-11-25/basic/index.mdx §Requests). An
// integer is any JSON number whose value is whole, however it is written
// (7, 1E2, 100.0) and however large; see IntegerKey.
func (id ID) Valid() bool {
	if len(id.raw) == 0 {
		return false
	}
	if id.raw[0] == '"' {
		_, ok := String(id.raw)
		return ok
	}
	_, ok := IntegerKey(id.raw)
	return ok
}

// Key identifies the id by value, for matching a cancel or a response to
// the request it names: 100 and 1E2 are one id, "a" and "\u0061" are one
// id, and "3" and 3 are two. It is "" for an id that is not Valid.
func (id ID) Key() string {
	if len(id.raw) > 0 && id.raw[0] == '"' {
		s, ok := String(id.raw)
		if !ok {
			return ""
		}
		return `"` + s
	}
	k, _ := IntegerKey(id.raw)
	return k
}

// String is the id as it appears on the wire.
func (id ID) String() string { return string(id.raw) }

// MarshalJSON implements json.Marshaler; an absent id marshals as null.
func (id ID) MarshalJSON() ([]byte, error) {
	if len(id.raw) == 0 {
		return []byte("null"), nil
	}
	return id.raw, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (id *ID) UnmarshalJSON(b []byte) error {
	id.raw = append(json.RawMessage(nil), trimSpace(b)...)
	return nil
}

// maxExponent bounds the exponent an integer may be written with (1e9 is
// a fine id); a number beyond it is refused rather than compared.
const maxExponent = 1 << 20

// IntegerKey reports whether raw is a JSON number with a whole value and,
// if so, returns a text that is equal for equal values: the sign, the
// significant digits and, for trailing zeros, an exponent ("100", "1E2"
// and "100.0" all give "1e2"; "42" gives "42"; "-0" gives "0"). A number
// whose exponent exceeds ±2^20 is refused.
func IntegerKey(raw []byte) (string, bool) {
	n := len(raw)
	if isPlainInteger(raw) {
		return string(raw), true
	}
	if !jsonscan.IsNumber(raw) {
		return "", false
	}
	i := 0
	neg := raw[0] == '-'
	if neg {
		i++
	}
	var digits []byte
	for i < n && raw[i] >= '0' && raw[i] <= '9' {
		digits = append(digits, raw[i])
		i++
	}
	frac := 0
	if i < n && raw[i] == '.' {
		i++
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			digits = append(digits, raw[i])
			frac++
			i++
		}
	}
	exp := 0
	if i < n && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		s := string(raw[i:])
		v, err := strconv.Atoi(s)
		if err != nil || v > maxExponent || v < -maxExponent {
			return "", false
		}
		exp = v
	}
	exp -= frac
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return "0", true
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp < 0 {
		return "", false
	}
	key := string(digits)
	if neg {
		key = "-" + key
	}
	if exp > 0 {
		key += "e" + strconv.Itoa(exp)
	}
	return key, true
}

// isPlainInteger reports an integer written without fraction, exponent or
// trailing zeros ("7", "-42", "0"), which is its own key.
func isPlainInteger(raw []byte) bool {
	if len(raw) == 1 && raw[0] == '0' {
		return true
	}
	if len(raw) > 0 && raw[0] == '-' {
		raw = raw[1:]
	}
	if len(raw) == 0 || raw[0] < '1' || raw[0] > '9' || raw[len(raw)-1] == '0' {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Message is any JSON-RPC message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID with Result or Error).
// Params, Result and the ID are slices of the decoded input.
type Message struct {
	ID     ID
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *Error

	hasMethod bool // "method" was present
	hasID     bool // "id" was present (maybe null)
}

// IsRequest reports a message with a method and an id.
func (m *Message) IsRequest() bool { return m.hasMethod && m.hasID }

// IsNotification reports a message with a method and no id.
func (m *Message) IsNotification() bool { return m.hasMethod && !m.hasID }

// IsResponse reports a message without a method that carries a result or an
// error.
func (m *Message) IsResponse() bool {
	return !m.hasMethod && m.hasID && (m.Result != nil || m.Error != nil)
}

// Error is a JSON-RPC error object. It implements error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Errorf returns an Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// syntaxError is the -32700 answer to b, in encoding/json's words.
func syntaxError(b []byte) *Error {
	var v any
	err := json.Unmarshal(b, &v)
	if err == nil {
		// Only the nesting limit is enforced here alone.
		return Errorf(CodeParseError, "Parse error: exceeded max depth")
	}
	return Errorf(CodeParseError, "Parse error: %v", err)
}

// Decode parses one JSON-RPC message in one pass. A syntax error yields a
// CodeParseError; a well-formed value that is not valid JSON-RPC yields a
// CodeInvalidRequest, with the id filled in when it could be read.
func Decode(b []byte) (*Message, *Error) {
	m := &Message{}
	var jsonrpc, method, params, result, errRaw []byte
	var hasJSONRPC, hasParams, hasResult, hasError bool
	dup := ""
	err := jsonscan.Object(b, func(key, value []byte) error {
		var seen bool
		switch string(key) {
		case "jsonrpc":
			seen, hasJSONRPC, jsonrpc = hasJSONRPC, true, value
		case "id":
			seen, m.hasID, m.ID.raw = m.hasID, true, value
		case "method":
			seen, m.hasMethod, method = m.hasMethod, true, value
		case "params":
			seen, hasParams, params = hasParams, true, value
		case "result":
			seen, hasResult, result = hasResult, true, value
		case "error":
			seen, hasError, errRaw = hasError, true, value
		}
		if seen && dup == "" {
			dup = string(key)
		}
		return nil
	})
	switch err {
	case nil:
	case jsonscan.ErrNotObject:
		if string(trimSpace(b)) == "null" {
			return m, m.invalid(`Invalid Request: "jsonrpc" must be "2.0"`)
		}
		return nil, Errorf(CodeInvalidRequest, "Invalid Request: a message must be a JSON object")
	default:
		return nil, syntaxError(b)
	}
	if dup != "" {
		if dup == "id" {
			m.ID = ID{}
		}
		return m, Errorf(CodeInvalidRequest, "Invalid Request: the key %q appears twice", dup)
	}
	if !hasJSONRPC || string(jsonrpc) != `"2.0"` {
		return m, m.invalid(`Invalid Request: "jsonrpc" must be "2.0"`)
	}
	if m.hasMethod {
		name, ok := String(method)
		if !ok {
			return m, m.invalid(`Invalid Request: "method" must be a string`)
		}
		m.Method = name
	}
	if hasParams {
		if len(params) == 0 || params[0] != '{' && params[0] != '[' {
			if string(params) != "null" {
				return m, m.invalid(`Invalid Request: "params" must be an object`)
			}
		} else {
			m.Params = params
		}
	}
	if m.hasID && m.hasMethod && !m.ID.Valid() {
		bad := m.ID
		m.ID = ID{}
		return m, Errorf(CodeInvalidRequest, "Invalid Request: id must be a string or an integer, got %s", bad.raw)
	}
	if !m.hasMethod {
		if !m.hasID || (!hasResult && !hasError) {
			return m, m.invalid(`Invalid Request: a message needs a "method", or an "id" with a "result" or "error"`)
		}
		if hasResult {
			m.Result = result
		}
		if hasError {
			m.Error = &Error{}
			if err := json.Unmarshal(errRaw, m.Error); err != nil {
				return m, m.invalid(`Invalid Request: "error" must be an error object`)
			}
		}
	}
	return m, nil
}

func (m *Message) invalid(msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: msg}
}

// response is the wire form of a response.
type response struct {
	JSONRPC string `json:"jsonrpc"`
	ID      ID     `json:"id"`
	Result  any    `json:"result,omitempty"`
	Error   *Error `json:"error,omitempty"`
}

// EncodeResult marshals a success response.
func EncodeResult(id ID, result any) ([]byte, error) {
	if result == nil {
		result = struct{}{}
	}
	return json.Marshal(response{JSONRPC: "2.0", ID: id, Result: result})
}

// EncodeRawResult builds a success response around a result that
// encoding/json already produced (valid, compact JSON), without encoding it
// a second time.
func EncodeRawResult(id ID, result json.RawMessage) []byte {
	if len(result) == 0 {
		result = json.RawMessage("{}")
	}
	idRaw, _ := id.MarshalJSON()
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(idRaw)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, idRaw...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// EncodeError marshals an error response. An absent id is sent as null.
func EncodeError(id ID, e *Error) []byte {
	if id.IsZero() {
		id = NullID
	}
	b, err := json.Marshal(response{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		// Data that cannot be marshalled is dropped rather than losing the error.
		b, _ = json.Marshal(response{JSONRPC: "2.0", ID: id, Error: &Error{Code: e.Code, Message: e.Message}})
	}
	return b
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// EncodeNotification marshals a notification.
func EncodeNotification(method string, params any) ([]byte, error) {
	return json.Marshal(notification{JSONRPC: "2.0", Method: method, Params: params})
}

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      ID     `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// EncodeRequest marshals a request (server to client).
func EncodeRequest(id ID, method string, params any) ([]byte, error) {
	return json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
}
