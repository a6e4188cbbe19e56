package frontend

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// handler serves one method. A nil result with a nil error means the
// handler saw its context end and has nothing to say; the pipeline decides
// what the client gets then (pipeline.go, finish).
type handler func(ctx context.Context, c *Call) (any, *jsonrpc.Error)

// method describes one entry of the method table.
type method struct {
	h      handler
	legacy bool // served in the legacy era
	modern bool // served in the modern era
	// when, if set, says whether the method is served now: its family is
	// registered (features.go).
	when func() bool
	// taskMethod: a method of tasks, which a modern request may call only
	// when it declares the extension (-32021) and a legacy session only
	// in 2025-11-25.
	taskMethod bool
	// intercepted: the method acts on a call already running and answers
	// at once (tasks/cancel, tasks/update); like notifications/cancelled it
	// is served before the policy limits and never queues (pipeline.go).
	intercepted bool
}

func (s *Server) methods() map[string]method {
	m := map[string]method{
		"ping":                 {h: s.ping, legacy: true},
		"logging/setLevel":     {h: s.setLevel, legacy: true},
		"server/discover":      {h: s.discover, modern: true},
		"subscriptions/listen": {h: s.listen, modern: true},
		"tools/list":           {h: s.listTools, legacy: true, modern: true},
		"tools/call":           {h: s.callTool, legacy: true, modern: true},
		"tasks/get":            {h: s.taskGet, legacy: true, modern: true, when: s.hasTasks, taskMethod: true},
		"tasks/update":         {h: s.taskUpdate, modern: true, when: s.modernTasks, taskMethod: true, intercepted: true},
		"tasks/cancel":         {h: s.taskCancel, legacy: true, modern: true, when: s.hasTasks, taskMethod: true, intercepted: true},
		"tasks/result":         {h: s.taskResult, legacy: true, when: s.hasTasks, taskMethod: true},
		"tasks/list":           {h: s.taskList, legacy: true, when: s.hasTasks, taskMethod: true},
	}
	s.addFeatureMethods(m)
	return m
}

// removedInModern are legacy methods that the modern era dropped.
var removedInModern = map[string]bool{
	"initialize": true, "notifications/initialized": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "notifications/roots/list_changed": true,
}

// lookup returns the handler for name in era, or a -32601 error.
func (s *Server) lookup(era Era, name string) (method, *jsonrpc.Error) {
	m, ok := s.table[name]
	if !ok || (era == EraModern && !m.modern) || (era == EraLegacy && !m.legacy) || (m.when != nil && !m.when()) {
		return method{}, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", name)
	}
	return m, nil
}

// serve runs a handler and shapes its result for the era. A nil result
// with a nil error is passed on as it came.
func (s *Server) serve(ctx context.Context, c *Call, m method) (json.RawMessage, *jsonrpc.Error) {
	res, jerr := m.h(ctx, c)
	if jerr != nil || res == nil {
		return nil, jerr
	}
	b, err := s.shapeResult(c.era, res)
	if err != nil {
		s.log.Error("encode result", zap.String("method", c.method), zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot encode the result")
	}
	return b, nil
}

// EncodeResult is res as a result of era is sent (without the JSON-RPC
// envelope): marshalled, and in the modern era with resultType (when res
// has none) and serverInfo in _meta. res is a map, a struct or an
// EncodedResult.
func (s *Server) EncodeResult(era Era, res any) (json.RawMessage, error) {
	return s.shapeResult(era, res)
}

// shapeResult marshals a result; in the modern era it adds resultType
// (when the handler did not) and serverInfo in _meta.
func (s *Server) shapeResult(era Era, res any) (json.RawMessage, error) {
	if r, ok := res.(EncodedResult); ok {
		return r.EncodeResult(ResultEnvelope{Modern: era == EraModern, meta: s.resultMeta}), nil
	}
	if era == EraModern {
		if m, ok := res.(map[string]any); ok {
			// Handlers build fresh maps: add the era's fields in place and
			// marshal once.
			if _, ok := m["resultType"]; !ok {
				m["resultType"] = "complete"
			}
			meta, _ := m["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			meta[metaServerInfo] = s.serverInfo()
			m["_meta"] = meta
			return json.Marshal(m)
		}
	}
	b, err := json.Marshal(res)
	if err != nil || era != EraModern {
		return b, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("result is not an object: %w", err)
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	si, _ := json.Marshal(s.serverInfo())
	meta[metaServerInfo] = si
	obj["_meta"], _ = json.Marshal(meta)
	return json.Marshal(obj)
}

// EncodedResult is a result that writes its own JSON (execute_code's,
// internal/tools), so that the commonest answer skips a map and the second
// pass of shapeResult. Its keys must come in sorted order, as
// encoding/json writes a map's, with the envelope's members in their
// places.
type EncodedResult interface {
	EncodeResult(e ResultEnvelope) json.RawMessage
}

// ResultEnvelope is what a result must carry in its era beside its own
// members: in the modern era, resultType and serverInfo in _meta
// (basic/index.mdx of 2026-07-28, §ResultType).
type ResultEnvelope struct {
	Modern bool
	meta   []byte // the modern _meta member, with its trailing comma
}

// AppendMeta appends the "_meta" member and a comma in the modern era,
// nothing in the legacy era: the first member of the object.
func (e ResultEnvelope) AppendMeta(b []byte) []byte {
	if !e.Modern {
		return b
	}
	return append(b, e.meta...)
}

// AppendResultType appends `,"resultType":"complete"` in the modern era,
// nothing in the legacy era.
func (e ResultEnvelope) AppendResultType(b []byte) []byte {
	if !e.Modern {
		return b
	}
	return append(b, `,"resultType":"complete"`...)
}

func (s *Server) ping(context.Context, *Call) (any, *jsonrpc.Error) { return struct{}{}, nil }

func (s *Server) setLevel(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	var p struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(c.params, &p); err != nil || levelRank(p.Level) < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency")
	}
	c.peer.setLogLevel(levelRank(p.Level))
	return struct{}{}, nil
}

func (s *Server) discover(context.Context, *Call) (any, *jsonrpc.Error) {
	res := map[string]any{
		"supportedVersions": allVersions,
		"capabilities":      s.capabilities(EraModern, VersionModern),
		"ttlMs":             300000,
		"cacheScope":        "public",
	}
	if in := s.getInstructions(); in != "" {
		res["instructions"] = in
	}
	return res, nil
}

// initializeResult answers a legacy initialize, negotiating the version.
func (s *Server) initializeResult(requested string) (map[string]any, string) {
	v := requested
	if !isLegacyVersion(v) {
		v = VersionLatest
	}
	res := map[string]any{
		"protocolVersion": v,
		"capabilities":    s.capabilities(EraLegacy, v),
		"serverInfo":      s.serverInfo(),
	}
	if in := s.getInstructions(); in != "" {
		res["instructions"] = in
	}
	return res, v
}

// listen serves subscriptions/listen: execd has nothing to push, so it
// acknowledges an empty set, keeps the stream open, and ends it with a
// result when the server stops. A client ends it by closing the stream
// (HTTP) or cancelling (stdio).
func (s *Server) listen(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	var p struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if len(c.params) > 0 {
		if err := json.Unmarshal(c.params, &p); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
		}
	}
	subMeta := map[string]any{metaSubscription: c.id}
	if err := c.Notify("notifications/subscriptions/acknowledged", map[string]any{
		"_meta": subMeta, "notifications": map[string]any{},
	}); err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: subscriptions/listen needs an answer that streams (Accept: text/event-stream)")
	}
	select {
	case <-ctx.Done():
		if clientEnded(ctx) {
			return nil, nil
		}
	case <-s.stopping:
	}
	return map[string]any{"_meta": subMeta}, nil
}
