// Package jsonrpc decodes and encodes JSON-RPC 2.0 messages as MCP uses
// them: one object per message (batches are split by the caller), ids that
// keep their JSON type, and errors that carry a code and optional data.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// ID is a request id kept as raw JSON so that it is echoed with its type:
// 3 stays 3 and "3" stays "3". The zero ID is absent; NullID is JSON null.
type ID struct{ raw json.RawMessage }

// NullID is the id of an error answering a message whose id is unknown.
var NullID = ID{raw: json.RawMessage("null")}

// NewIntID returns an integer id.
func NewIntID(n int64) ID { return ID{raw: json.RawMessage(fmt.Sprint(n))} }

// NewStringID returns a string id.
func NewStringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: b}
}

// IsZero reports whether the id is absent (a notification).
func (id ID) IsZero() bool { return len(id.raw) == 0 }

// IsNull reports whether the id is JSON null.
func (id ID) IsNull() bool { return string(id.raw) == "null" }

// Valid reports whether the id is a string or an integer, as MCP requires.
func (id ID) Valid() bool {
	if len(id.raw) == 0 {
		return false
	}
	switch id.raw[0] {
	case '"':
		var s string
		return json.Unmarshal(id.raw, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		// JSON integers only: no fraction or exponent, and within int64.
		_, err := strconv.ParseInt(string(id.raw), 10, 64)
		return err == nil && (id.raw[0] != '-' || len(id.raw) > 1) && !leadingZero(id.raw)
	}
	return false
}

// leadingZero reports a number JSON forbids, such as 01 or -012.
func leadingZero(b []byte) bool {
	if b[0] == '-' {
		b = b[1:]
	}
	return len(b) > 1 && b[0] == '0'
}

// Key is a string that identifies the id with its type ("3" and 3 differ).
func (id ID) Key() string { return string(id.raw) }

// Raw returns the id's JSON.
func (id ID) Raw() json.RawMessage { return id.raw }

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
	id.raw = append(json.RawMessage(nil), bytes.TrimSpace(b)...)
	return nil
}

// Message is any JSON-RPC message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID with Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      ID              `json:"id,omitzero"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`

	hasMethod   bool // "method" was present
	methodIsStr bool // and was a string
	hasID       bool // "id" was present (maybe null)
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

// ErrNotObject reports a message that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Decode parses one JSON-RPC message. A syntax error yields a
// CodeParseError; a well-formed object that is not valid JSON-RPC yields a
// CodeInvalidRequest, with the id filled in when it could be read.
func Decode(b []byte) (*Message, *Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, Errorf(CodeInvalidRequest, "Invalid Request: a message must be a JSON object")
		}
		return nil, Errorf(CodeParseError, "Parse error: %v", err)
	}
	m := &Message{}
	if raw, ok := fields["id"]; ok {
		m.hasID = true
		m.ID.raw = append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
	}
	if raw, ok := fields["jsonrpc"]; !ok || string(bytes.TrimSpace(raw)) != `"2.0"` {
		return m, m.invalid(`Invalid Request: "jsonrpc" must be "2.0"`)
	}
	m.JSONRPC = "2.0"
	if raw, ok := fields["method"]; ok {
		m.hasMethod = true
		if name, ok := plainString(raw); ok {
			m.Method = name
		} else if err := json.Unmarshal(raw, &m.Method); err != nil {
			return m, m.invalid(`Invalid Request: "method" must be a string`)
		}
		m.methodIsStr = true
	}
	if raw, ok := fields["params"]; ok {
		t := bytes.TrimSpace(raw)
		if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
			if string(t) != "null" {
				return m, m.invalid(`Invalid Request: "params" must be an object`)
			}
		} else {
			m.Params = append(json.RawMessage(nil), t...)
		}
	}
	if m.hasID && (m.ID.IsNull() || !m.ID.Valid()) {
		if m.hasMethod {
			bad := m.ID
			m.ID = ID{}
			return m, Errorf(CodeInvalidRequest, "Invalid Request: id must be a string or an integer, got %s", bad.raw)
		}
	}
	if !m.hasMethod {
		r, hasResult := fields["result"]
		e, hasError := fields["error"]
		if !m.hasID || (!hasResult && !hasError) {
			return m, m.invalid(`Invalid Request: a message needs a "method", or an "id" with a "result" or "error"`)
		}
		if hasResult {
			m.Result = append(json.RawMessage(nil), r...)
		}
		if hasError {
			m.Error = &Error{}
			if err := json.Unmarshal(e, m.Error); err != nil {
				return m, m.invalid(`Invalid Request: "error" must be an error object`)
			}
		}
	}
	return m, nil
}

// plainString reads a JSON string that has no escapes without the decoder;
// anything else is left to encoding/json.
func plainString(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return string(body), true
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
