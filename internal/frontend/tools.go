package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"execd/internal/jsonrpc"
)

// tool is one entry of tools/list.
type tool struct {
	name string
	def  map[string]any
	// schema and mirrors are read from def's inputSchema: the declared
	// arguments, and those a modern client mirrors into Mcp-Param-*.
	schema  argSchema
	mirrors []mirror
	// needs lists client capabilities a modern request must declare to call
	// the tool (-32021).
	needs []string
	run   func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error)
}

// mirror is an argument declared with "x-mcp-header".
type mirror struct{ header, arg string }

// toolSet keeps tools in tools/list order.
type toolSet struct {
	list   []*tool
	byName map[string]*tool
}

func (ts *toolSet) add(t *tool) error {
	if t.name == "" || ts.byName[t.name] != nil {
		return fmt.Errorf("frontend: tool name %q is empty or taken", t.name)
	}
	def := make(map[string]any, len(t.def)+1)
	for k, v := range t.def {
		def[k] = v
	}
	def["name"] = t.name
	t.def = def
	in, _ := def["inputSchema"].(map[string]any)
	t.schema = newArgSchema(in)
	props, _ := in["properties"].(map[string]any)
	for _, arg := range t.schema.known {
		p, _ := props[arg].(map[string]any)
		if h, ok := p["x-mcp-header"].(string); ok && h != "" {
			t.mirrors = append(t.mirrors, mirror{header: h, arg: arg})
		}
	}
	ts.list = append(ts.list, t)
	ts.byName[t.name] = t
	return nil
}

func newToolSet(s *Server) *toolSet {
	ts := &toolSet{byName: map[string]*tool{}}
	// execute_code first: clients (and the conformance header scenarios)
	// call the first listed tool.
	for _, t := range []*tool{s.executeCodeTool(), s.listWorkspacesTool(), s.resetWorkspaceTool(), s.deleteWorkspaceTool(),
		s.checkpointWorkspaceTool(), s.restoreWorkspaceTool(), s.forkWorkspaceTool(), s.readFileTool(), s.writeFileTool()} {
		_ = ts.add(t)
	}
	return ts
}

func (s *Server) listTools(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	if !jsonrpc.IsNull(c.meta.head.cursor) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor (the list has one page)")
	}
	return s.toolsList[c.era], nil
}

// encodeToolsList encodes tools/list's result once per era: the list
// never changes while the server runs.
func (s *Server) encodeToolsList() error {
	for _, era := range []Era{EraLegacy, EraModern} {
		defs := make([]map[string]any, len(s.tools.list))
		for i, t := range s.tools.list {
			defs[i] = t.def
		}
		res := map[string]any{"tools": defs}
		if era == EraModern {
			res["ttlMs"] = 300000
			res["cacheScope"] = "public"
		}
		b, err := s.shapeResult(era, res)
		if err != nil {
			return fmt.Errorf("frontend: tools/list: %w", err)
		}
		s.toolsList[era] = preEncoded(b)
	}
	return nil
}

// preEncoded is a result encoded in advance for its era.
type preEncoded json.RawMessage

func (p preEncoded) encode(Era, string) json.RawMessage { return json.RawMessage(p) }

// toolCallParams is params of tools/call.
type toolCallParams struct {
	Name      string
	Arguments json.RawMessage
	Task      json.RawMessage
}

// parseToolCall reads tools/call params from the request's parsed head.
func parseToolCall(m requestMeta) (toolCallParams, *jsonrpc.Error) {
	if !m.head.object {
		return toolCallParams{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tools/call needs params with a tool name")
	}
	p := toolCallParams{Arguments: m.head.arguments, Task: m.head.task}
	if m.head.name != nil {
		name, ok := jsonrpc.String(m.head.name)
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
	p, jerr := parseToolCall(c.meta)
	c.toolCall, c.toolErr = p, jerr
	if jerr != nil || !jsonrpc.IsNull(p.Task) {
		return nil
	}
	t := s.tools.byName[p.Name]
	if t == nil {
		return nil
	}
	c.tool = t
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
	if !jsonrpc.IsNull(p.Task) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tasks are not supported: call %s without task", p.Name)
	}
	t := c.tool
	if t == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown tool: %s", p.Name)
	}
	if !jsonrpc.IsNull(p.Arguments) && !jsonrpc.IsObject(p.Arguments) {
		return toolResult(map[string]any{"error": "arguments must be an object"}, true), nil
	}
	return t.run(ctx, c, c.args)
}

// toolResult is a CallToolResult whose text block is exactly the
// structured content serialised, so that every client shows the model the
// same thing: Claude Code shows the model only structuredContent on
// success and only the text on errors (RATIONALE.md).
func toolResult(structured any, isError bool) map[string]any {
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
