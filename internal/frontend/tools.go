package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
	"execd/internal/worker"
	"execd/internal/workspace"
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
	for _, t := range []*tool{s.executeCodeTool(), s.listWorkspacesTool(), s.resetWorkspaceTool(), s.deleteWorkspaceTool()} {
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

var annotationsRun = map[string]any{
	"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false,
}

func (s *Server) executeCodeTool() *tool {
	langs := s.opts.Languages
	desc := "Run code in an isolated sandbox (" + strings.Join(langs, ", ") + ") and return its printed output and the value of its last expression. " +
		"The sandbox is a workspace, like a notebook kernel: variables, functions and files under /workspace stay there between calls. " +
		"Every result names its workspace; pass that id back as `workspace` to continue in the same state (omit it to start a fresh one, or choose a name such as \"analysis\"). " +
		"Report long work with progress(done, total, message). No network access; files live under /workspace."
	return &tool{
		name: "execute_code",
		def: map[string]any{
			"title":       "Execute code",
			"description": desc,
			"inputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"code":     map[string]any{"type": "string", "description": "The code to run. The value of the last expression is returned as result."},
					"language": map[string]any{"type": "string", "enum": langs, "description": "The language of the code."},
					"workspace": map[string]any{"type": "string", "x-mcp-header": "Workspace",
						"description": "The workspace to run in: the id a previous result returned, or a name of your choice (1-64 characters of A-Z a-z 0-9 . _ -). Omit to create a new one."},
					"timeout_ms": map[string]any{"type": "integer", "minimum": 1, "description": "Stop the code after this many milliseconds (the workspace keeps its state)."},
				},
				"required":             []string{"code", "language"},
				"additionalProperties": false,
			},
			"outputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"status":     map[string]any{"type": "string", "enum": []string{"ok", "error", "timeout", "interrupted", "oom", "reset"}},
					"stdout":     map[string]any{"type": "string"},
					"stderr":     map[string]any{"type": "string"},
					"result":     map[string]any{"type": "string", "description": "The printable value of the last expression, when there is one."},
					"error":      map[string]any{"type": "string"},
					"workspace":  map[string]any{"type": "string"},
					"language":   map[string]any{"type": "string"},
					"durationMs": map[string]any{"type": "integer"},
					"truncated":  map[string]any{"type": "boolean"},
					"reset":      map[string]any{"type": "boolean", "description": "State from earlier calls was lost (the sandbox was restarted)."},
				},
				"required": []string{"status"},
			},
			"annotations": annotationsRun,
		},
		run: s.executeCode,
	}
}

func (s *Server) executeCode(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
	fail := func(ws, format string, a ...any) (any, *jsonrpc.Error) {
		return execResult{out: execOutput{Status: string(worker.StatusError), Error: fmt.Sprintf(format, a...), Workspace: ws}, isError: true}, nil
	}
	code, err := args.stringArg("code")
	if err != nil {
		return fail("", "%v", err)
	}
	language, err := args.stringArg("language")
	if err != nil {
		return fail("", "%v", err)
	}
	wsArg, err := args.stringArg("workspace")
	if err != nil {
		return fail("", "%v", err)
	}
	ws := ""
	if wsArg != nil {
		ws = *wsArg
	}
	if code == nil {
		return fail(ws, "missing argument code: the code to run")
	}
	if language == nil || strings.TrimSpace(*language) == "" {
		return fail(ws, "missing argument language: one of %s", strings.Join(s.opts.Languages, ", "))
	}
	timeout := s.opts.RequestTimeout
	if t := args.get("timeout_ms"); !jsonrpc.IsNull(t) {
		var ms int64
		if err := json.Unmarshal(t, &ms); err != nil || ms < 1 {
			return fail(ws, "timeout_ms must be a positive integer (milliseconds)")
		}
		d := time.Duration(min(ms, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		if timeout == 0 || d < timeout {
			timeout = d
		}
	}
	lang := strings.ToLower(strings.TrimSpace(*language))

	rep := c.reporter()
	defer rep.Stop()
	rep.Start("accepted " + lang + " code")
	// The timeout bounds the run, not the wait for a busy workspace or a
	// run slot: a queued call can still be cancelled by its client.
	out, err := s.exec.Run(ctx, workspace.Request{
		Principal: c.principal, Workspace: ws, Language: lang, Code: *code, Sink: rep, Timeout: timeout,
	})
	if err != nil {
		var we *workspace.Error
		switch {
		case errors.As(err, &we):
			return fail(ws, "%s", we.Msg)
		case errors.Is(context.Cause(ctx), errShutdown):
			return fail(ws, "execd is shutting down; the code did not run")
		case ctx.Err() != nil:
			return nil, nil // the client went away while the call waited
		}
		s.log.Error("execute_code", zap.String("workspace", ws), zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %v", err)
	}
	rep.Flush()
	rep.Stop()
	c.setWorkspace(out.Workspace)
	r := out.Result
	o := execOutput{
		Status:     string(r.Status),
		Stdout:     r.Stdout,
		Stderr:     r.Stderr,
		Result:     r.Value,
		Workspace:  out.Workspace,
		Language:   lang,
		DurationMs: r.Duration.Milliseconds(),
		Truncated:  r.Truncated,
		Reset:      r.Reset,
	}
	if r.Error != nil {
		o.Error = formatGuestError(r.Error)
	}
	switch r.Status {
	case worker.StatusTimeout:
		o.Error = joinErr(fmt.Sprintf("timed out after %s; the workspace keeps its state", timeout), o.Error, r.Reset)
	case worker.StatusInterrupted:
		if errors.Is(context.Cause(ctx), errShutdown) {
			o.Error = joinErr("execd is shutting down; the run was stopped", o.Error, r.Reset)
		} else {
			o.Error = joinErr("the run was interrupted", o.Error, r.Reset)
		}
	case worker.StatusOOM:
		if o.Error == "" {
			o.Error = "out of memory"
		}
	}
	isErr := r.Status != worker.StatusOK && r.Status != worker.StatusReset
	if r.Truncated {
		// Lost output is a failure the model must notice: the run itself
		// may have succeeded, which status still says.
		isErr = true
		if o.Error == "" {
			limit := "the output limit"
			if s.opts.MaxOutputBytes > 0 {
				limit = fmt.Sprintf("%d bytes", s.opts.MaxOutputBytes)
			}
			o.Error = fmt.Sprintf("output truncated: stdout or stderr exceeded %s; the head and the tail are kept. Print less, or write large output to a file under /workspace", limit)
		}
	}
	if r.Reset {
		c.Log("warning", fmt.Sprintf("workspace %s was restarted: state from earlier calls is lost, files are kept", out.Workspace))
	}
	return execResult{out: o, isError: isErr}, nil
}

func joinErr(head, guest string, reset bool) string {
	if reset {
		head = strings.Replace(head, "; the workspace keeps its state", "", 1) + "; the sandbox had to be restarted and its state is lost (files are kept)"
	}
	if guest == "" {
		return head
	}
	return head + "\n" + guest
}

func formatGuestError(e *worker.GuestError) string {
	s := e.Message
	if e.Type != "" {
		s = e.Type + ": " + e.Message
	}
	if st := strings.TrimRight(e.Stack, "\n"); st != "" && !strings.Contains(s, st) {
		s += "\n" + st
	}
	return s
}
