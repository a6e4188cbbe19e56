package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// headers maps an x-mcp-header name (lower case) to the argument it
	// mirrors, for Mcp-Param-* validation.
	headers map[string]string
	// needs lists client capabilities the tool requires (MM-2).
	needs []string
	run   func(ctx context.Context, c *call, args json.RawMessage) (any, *jsonrpc.Error)
}

// toolSet keeps tools in tools/list order.
type toolSet struct {
	list   []*tool
	byName map[string]*tool
}

func (ts *toolSet) add(t *tool) {
	t.def["name"] = t.name
	ts.list = append(ts.list, t)
	ts.byName[t.name] = t
}

func newToolSet(s *Server) *toolSet {
	ts := &toolSet{byName: map[string]*tool{}}
	ts.add(s.executeCodeTool())
	ts.add(s.listWorkspacesTool())
	ts.add(s.resetWorkspaceTool())
	ts.add(s.deleteWorkspaceTool())
	return ts
}

func (s *Server) listTools(_ context.Context, c *call) (any, *jsonrpc.Error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(c.params) > 0 {
		_ = json.Unmarshal(c.params, &p)
	}
	if p.Cursor != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor (the list has one page)")
	}
	defs := make([]map[string]any, len(s.tools.list))
	for i, t := range s.tools.list {
		defs[i] = t.def
	}
	res := map[string]any{"tools": defs}
	if c.era == EraModern {
		res["ttlMs"] = 300000
		res["cacheScope"] = "public"
	}
	return res, nil
}

// toolCallParams is params of tools/call.
type toolCallParams struct {
	Name      string
	Arguments json.RawMessage
	Task      json.RawMessage
}

// parseToolCall reads tools/call params from the request's parsed head.
func parseToolCall(m requestMeta) (toolCallParams, *jsonrpc.Error) {
	if !m.headOK {
		return toolCallParams{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tools/call needs params with a tool name")
	}
	p := toolCallParams{Arguments: m.head.Arguments, Task: m.head.Task}
	if len(m.head.Name) > 0 {
		if err := json.Unmarshal(m.head.Name, &p.Name); err != nil {
			return p, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the tool name must be a string")
		}
	}
	if p.Name == "" {
		return p, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tools/call needs a tool name")
	}
	return p, nil
}

func (s *Server) callTool(ctx context.Context, c *call) (any, *jsonrpc.Error) {
	p, jerr := parseToolCall(c.meta)
	if jerr != nil {
		return nil, jerr
	}
	if len(p.Task) > 0 && string(p.Task) != "null" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tasks are not supported: call %s without task", p.Name)
	}
	t := s.tools.byName[p.Name]
	if t == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Unknown tool: %s", p.Name)
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	return t.run(ctx, c, args)
}

// toolResult is a CallToolResult whose text block is exactly the
// structured content serialised, so that every client shows the model the
// same thing (protocol.md §7.1).
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

// execOutput is execute_code's structuredContent.
type execOutput struct {
	Status     string  `json:"status"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
	Result     *string `json:"result,omitempty"`
	Error      string  `json:"error,omitempty"`
	Workspace  string  `json:"workspace,omitempty"`
	Language   string  `json:"language,omitempty"`
	DurationMs int64   `json:"durationMs"`
	Truncated  bool    `json:"truncated"`
	Reset      bool    `json:"reset,omitempty"`
}

var annotationsRun = map[string]any{
	"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false,
}

func (s *Server) executeCodeTool() *tool {
	langs := s.langs
	if len(langs) == 0 {
		langs = []string{"javascript"}
	}
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
				"required": []string{"code", "language"},
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
		headers: map[string]string{"workspace": "workspace"},
		run:     s.executeCode,
	}
}

// execArgs are execute_code's arguments.
type execArgs struct {
	Code      *string         `json:"code"`
	Language  *string         `json:"language"`
	Workspace *string         `json:"workspace"`
	TimeoutMs json.RawMessage `json:"timeout_ms"`
}

func decodeArgs(args json.RawMessage, v any) error {
	if !isObject(args) {
		return errors.New("arguments must be an object")
	}
	if err := json.Unmarshal(args, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("argument %s must be a %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int64", "float64":
		return "number"
	}
	return goKind
}

func (s *Server) executeCode(ctx context.Context, c *call, raw json.RawMessage) (any, *jsonrpc.Error) {
	var a execArgs
	fail := func(ws, format string, args ...any) (any, *jsonrpc.Error) {
		return toolResult(execOutput{Status: string(worker.StatusError), Error: fmt.Sprintf(format, args...), Workspace: ws}, true), nil
	}
	if err := decodeArgs(raw, &a); err != nil {
		return fail("", "%v", err)
	}
	ws := ""
	if a.Workspace != nil {
		ws = *a.Workspace
	}
	if a.Code == nil {
		return fail(ws, "missing argument code: the code to run")
	}
	if a.Language == nil || strings.TrimSpace(*a.Language) == "" {
		return fail(ws, "missing argument language: one of %s", strings.Join(s.langs, ", "))
	}
	timeout := s.cfg.Limits.RequestTimeout.Duration
	if t := bytes.TrimSpace(a.TimeoutMs); len(t) > 0 && string(t) != "null" {
		var ms int64
		if err := json.Unmarshal(t, &ms); err != nil || ms < 1 {
			return fail(ws, "timeout_ms must be a positive integer (milliseconds)")
		}
		d := time.Duration(min(ms, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		if timeout == 0 || d < timeout {
			timeout = d
		}
	}
	lang := strings.ToLower(strings.TrimSpace(*a.Language))

	rep := c.reporter(s.cfg.Protocol.ProgressHeartbeat.Duration)
	defer rep.Stop()
	rep.Start("accepted " + lang + " code")
	// The timeout bounds the run, not the wait for a busy workspace or a
	// run slot: a queued call can still be cancelled by its client.
	out, err := s.exec.Run(ctx, workspace.Request{
		Principal: c.principal, Workspace: ws, Language: lang, Code: *a.Code, Sink: rep, Timeout: timeout,
	})
	if clientEnded(ctx) {
		rep.Stop()
		return nil, nil
	}
	if err != nil {
		var we *workspace.Error
		if errors.As(err, &we) {
			return fail(ws, "%s", we.Msg)
		}
		if errors.Is(context.Cause(ctx), errShutdown) {
			return fail(ws, "execd is shutting down; the code did not run")
		}
		s.log.Error("execute_code", zap.String("workspace", ws), zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %v", err)
	}
	rep.Flush()
	rep.Stop()
	c.mu.Lock()
	c.workspace = out.Workspace
	c.mu.Unlock()
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
		// Lost output is a failure the model must notice (house rule): the
		// run itself may have succeeded, which status still says.
		isErr = true
		if o.Error == "" {
			o.Error = fmt.Sprintf("output truncated: stdout or stderr exceeded %d bytes; the head and the tail are kept. Print less, or write large output to a file under /workspace", s.cfg.Limits.MaxOutputBytes)
		}
	}
	if r.Reset {
		c.logMessage("warning", fmt.Sprintf("workspace %s was restarted: state from earlier calls is lost, files are kept", out.Workspace))
	}
	return toolResult(o, isErr), nil
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

// Workspace tools.

type wsArgs struct {
	Workspace *string `json:"workspace"`
	Files     *bool   `json:"files"`
}

func workspaceProp() map[string]any {
	return map[string]any{"type": "string", "x-mcp-header": "Workspace", "description": "The workspace id."}
}

func (s *Server) listWorkspacesTool() *tool {
	return &tool{
		name: "list_workspaces",
		def: map[string]any{
			"title":       "List workspaces",
			"description": "List your workspaces: id, languages with live interpreters, whether each is running, when it was last used and the disk its files use.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
			"outputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspaces": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}},
				"required":   []string{"workspaces"},
			},
			"annotations": map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
		},
		run: func(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
			infos := s.exec.List(c.principal)
			list := make([]map[string]any, 0, len(infos))
			for _, in := range infos {
				e := map[string]any{
					"workspace": in.ID, "languages": in.Languages, "live": in.Live, "running": in.Running,
					"diskBytes": in.DiskBytes,
				}
				if in.Languages == nil {
					e["languages"] = []string{}
				}
				if !in.LastUsed.IsZero() {
					e["lastUsed"] = in.LastUsed.UTC().Format(time.RFC3339)
				}
				list = append(list, e)
			}
			return toolResult(map[string]any{"workspaces": list}, false), nil
		},
	}
}

func (s *Server) resetWorkspaceTool() *tool {
	return &tool{
		name: "reset_workspace",
		def: map[string]any{
			"title":       "Reset a workspace",
			"description": "Drop a workspace's interpreter state (variables, functions). Files under /workspace are kept unless files is true.",
			"inputSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"workspace": workspaceProp(),
					"files":     map[string]any{"type": "boolean", "description": "Also delete the workspace's files."},
				},
				"required": []string{"workspace"},
			},
			"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		headers: map[string]string{"workspace": "workspace"},
		run: func(ctx context.Context, c *call, raw json.RawMessage) (any, *jsonrpc.Error) {
			return s.workspaceOp(ctx, c, raw, "reset", func(ws string, files bool) error {
				return s.exec.Reset(ctx, c.principal, ws, files)
			})
		},
	}
}

func (s *Server) deleteWorkspaceTool() *tool {
	return &tool{
		name: "delete_workspace",
		def: map[string]any{
			"title":       "Delete a workspace",
			"description": "Delete a workspace: its interpreter state and all its files.",
			"inputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspace": workspaceProp()},
				"required":   []string{"workspace"},
			},
			"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		headers: map[string]string{"workspace": "workspace"},
		run: func(ctx context.Context, c *call, raw json.RawMessage) (any, *jsonrpc.Error) {
			return s.workspaceOp(ctx, c, raw, "deleted", func(ws string, _ bool) error {
				return s.exec.Delete(ctx, c.principal, ws)
			})
		},
	}
}

func (s *Server) workspaceOp(_ context.Context, _ *call, raw json.RawMessage, verb string, op func(string, bool) error) (any, *jsonrpc.Error) {
	var a wsArgs
	if err := decodeArgs(raw, &a); err != nil {
		return toolResult(map[string]any{"error": err.Error()}, true), nil
	}
	if a.Workspace == nil || *a.Workspace == "" {
		return toolResult(map[string]any{"error": "missing argument workspace"}, true), nil
	}
	files := a.Files != nil && *a.Files
	if err := op(*a.Workspace, files); err != nil {
		var we *workspace.Error
		msg := err.Error()
		if errors.As(err, &we) {
			msg = we.Msg
		}
		return toolResult(map[string]any{"workspace": *a.Workspace, "error": msg}, true), nil
	}
	out := map[string]any{"workspace": *a.Workspace, "status": verb}
	if verb == "reset" {
		out["filesDeleted"] = files
	}
	return toolResult(out, false), nil
}
