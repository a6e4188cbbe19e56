package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

func (s *Server) listTools(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	if !jsonrpc.IsNull(c.meta.head.cursor) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor (the list has one page)")
	}
	kind := listLegacy
	switch {
	case c.era == EraModern:
		kind = listModern
	case c.version == VersionLatest && s.hasTasks():
		kind = listLegacyTasks
	}
	res, err := s.toolsList(kind, c.principal)
	if err != nil {
		s.log.Error("encode tools/list", zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot encode the tool list")
	}
	return res, nil
}

// toolsList is tools/list's result of kind for principal, encoded once
// per change of the list (per principal when a tool's description
// depends on it: SetDescriber).
func (s *Server) toolsList(kind listKind, principal string) (preEncoded, error) {
	ts := s.tools
	key := principalList{kind, principal}
	ts.mu.RLock()
	enc, mine := ts.encoded[kind], ts.described > 0
	if mine {
		enc = ts.mine[key]
	}
	ts.mu.RUnlock()
	if enc != nil {
		return enc, nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	mine = ts.described > 0
	if enc := ts.encoded[kind]; enc != nil && !mine {
		return enc, nil
	}
	if enc := ts.mine[key]; enc != nil && mine {
		return enc, nil
	}
	defs := make([]map[string]any, len(ts.list))
	for i, t := range ts.list {
		defs[i] = t.def
		if t.describe == nil && (kind != listLegacyTasks || t.tasks == TaskNever) {
			continue
		}
		d := make(map[string]any, len(t.def)+1)
		for k, v := range t.def {
			d[k] = v
		}
		if t.describe != nil {
			if desc := t.describe(principal); desc != "" {
				d["description"] = desc
			}
		}
		if kind == listLegacyTasks && t.tasks != TaskNever {
			// execution.taskSupport (schema 2025-11-25 Tool); the modern
			// era has no such field: the server decides.
			d["execution"] = map[string]any{"taskSupport": t.tasks.String()}
		}
		defs[i] = d
	}
	era := EraLegacy
	if kind == listModern {
		era = EraModern
	}
	res := map[string]any{"tools": defs}
	if era == EraModern {
		res["ttlMs"] = 300000
		res["cacheScope"] = "public"
		if mine {
			res["cacheScope"] = "private" // this principal's
		}
	}
	b, err := s.shapeResult(era, res)
	if err != nil {
		return nil, err
	}
	if !mine {
		ts.encoded[kind] = preEncoded(b)
		return ts.encoded[kind], nil
	}
	if ts.mine == nil || len(ts.mine) >= maxPrincipalLists {
		ts.mine = make(map[principalList]preEncoded)
	}
	ts.mine[key] = preEncoded(b)
	return ts.mine[key], nil
}

// preEncoded is a result encoded in advance for its era.
type preEncoded json.RawMessage

func (p preEncoded) EncodeResult(ResultEnvelope) json.RawMessage { return json.RawMessage(p) }

// toolCallParams is params of tools/call.
type toolCallParams struct {
	Name      string
	Arguments json.RawMessage
	Task      json.RawMessage
}

// parseToolCall reads tools/call params from the request's parsed head;
// the name is read as one of ts's (toolSet.name).
func parseToolCall(m requestMeta, ts *toolSet) (toolCallParams, *jsonrpc.Error) {
	if !m.head.object {
		return toolCallParams{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tools/call needs params with a tool name")
	}
	p := toolCallParams{Arguments: m.head.arguments, Task: m.head.task}
	if m.head.name != nil {
		name, ok := ts.name(m.head.name)
		if !ok {
			return p, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the tool name must be a string")
		}
		p.Name = name
	}
	if p.Name == "" {
		return p, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tools/call needs a tool name")
	}
	return p, nil
}

// prepareTool reads a call of a known tool before it runs: the client
// capabilities it needs (modern era, -32021), its arguments by exact key
// (-32602, args.go) and, over HTTP in the modern era, the Mcp-Param-*
// headers that mirror them (-32020). A call the handler must answer
// in-band (no name, an unknown tool, a task) passes on untouched, and so do
// arguments that are not an object, which the tool refuses as an isError
// result.
func (s *Server) prepareTool(c *Call, hdr http.Header) *reply {
	p, jerr := parseToolCall(c.meta, s.tools)
	c.toolCall, c.toolErr = p, jerr
	if jerr != nil {
		return nil
	}
	t := s.tools.get(p.Name)
	if t == nil {
		return nil
	}
	c.tool = t
	if r := s.prepareTask(c, t); r != nil {
		return r
	}
	if c.era == EraModern {
		var miss map[string]any
		for _, n := range t.needs {
			if !c.meta.hasCapability(n) {
				if miss == nil {
					miss = map[string]any{}
				}
				miss[n] = map[string]any{}
			}
		}
		if miss != nil {
			return refuse(http.StatusBadRequest, c.id, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability,
				Message: "Missing required client capability", Data: map[string]any{"requiredCapabilities": miss}})
		}
	}
	if jsonrpc.IsNull(p.Arguments) || !jsonrpc.IsObject(p.Arguments) {
		return nil
	}
	args, jerr := t.schema.decode(t.name, p.Arguments)
	if jerr != nil {
		return refuse(http.StatusOK, c.id, jerr)
	}
	c.args = args
	if c.era == EraModern && hdr != nil {
		if jerr := checkParamHeaders(hdr, t, args); jerr != nil {
			return refuse(http.StatusBadRequest, c.id, jerr)
		}
	}
	return nil
}

func (s *Server) callTool(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	p := c.toolCall
	if c.toolErr != nil {
		return nil, c.toolErr
	}
	t := c.tool
	// A modern request's task param means nothing (the server decides,
	// experimental-ext-tasks tasks.mdx); a legacy one is honoured when the
	// session's revision has tasks and the tool takes them (tasks.go).
	if c.era == EraLegacy && !jsonrpc.IsNull(p.Task) && c.task.mode == taskNo {
		if t != nil && s.hasTasks() && c.version == VersionLatest {
			return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: tool %s does not run as a task: call it without task", p.Name)
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tasks are not supported: call %s without task", p.Name)
	}
	if t == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown tool: %s", p.Name)
	}
	if !jsonrpc.IsNull(p.Arguments) && !jsonrpc.IsObject(p.Arguments) {
		return StructuredResult(map[string]any{"error": "arguments must be an object"}, true), nil
	}
	return t.run(ctx, c, c.args)
}

// StructuredResult is a CallToolResult whose text block is exactly the
// structured content serialised, so that every client shows the model the
// same thing: Claude Code shows the model only structuredContent on
// success and only the text on errors (RATIONALE.md).
func StructuredResult(structured any, isError bool) map[string]any {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(structured)
	return map[string]any{
		"content":           []map[string]any{{"type": "text", "text": strings.TrimRight(buf.String(), "\n")}},
		"structuredContent": structured,
		"isError":           isError,
	}
}
