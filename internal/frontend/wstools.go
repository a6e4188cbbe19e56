package frontend

import (
	"context"
	"errors"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/workspace"
)

// The workspace tools: list_workspaces, reset_workspace, delete_workspace.

func workspaceProp() map[string]any {
	return map[string]any{"type": "string", "x-mcp-header": "Workspace", "description": "The workspace id."}
}

func (s *Server) listWorkspacesTool() *tool {
	return &tool{
		name: "list_workspaces",
		def: map[string]any{
			"title":       "List workspaces",
			"description": "List your workspaces: id, languages with live interpreters, whether each is running, when it was last used and the disk its files use.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
			"outputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspaces": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}},
				"required":   []string{"workspaces"},
			},
			"annotations": map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
		},
		run: func(ctx context.Context, c *Call, _ arguments) (any, *jsonrpc.Error) {
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
				"required":             []string{"workspace"},
				"additionalProperties": false,
			},
			"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			return s.workspaceOp(ctx, args, "reset", func(ws string, files bool) error {
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
				"type":                 "object",
				"properties":           map[string]any{"workspace": workspaceProp()},
				"required":             []string{"workspace"},
				"additionalProperties": false,
			},
			"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			return s.workspaceOp(ctx, args, "deleted", func(ws string, _ bool) error {
				return s.exec.Delete(ctx, c.principal, ws)
			})
		},
	}
}

// workspaceOp runs a reset or a delete, which wait their turn in the
// workspace's queue like any call: a client that cancels while it waits
// gets no answer (the pipeline decides), and shutdown says why.
func (s *Server) workspaceOp(ctx context.Context, args arguments, verb string, op func(string, bool) error) (any, *jsonrpc.Error) {
	ws, err := args.stringArg("workspace")
	if err != nil {
		return toolResult(map[string]any{"error": err.Error()}, true), nil
	}
	files, err := args.boolArg("files")
	if err != nil {
		return toolResult(map[string]any{"error": err.Error()}, true), nil
	}
	if ws == nil || *ws == "" {
		return toolResult(map[string]any{"error": "missing argument workspace"}, true), nil
	}
	delFiles := files != nil && *files
	if err := op(*ws, delFiles); err != nil {
		var we *workspace.Error
		msg := err.Error()
		switch {
		case errors.As(err, &we):
			msg = we.Msg
		case errors.Is(context.Cause(ctx), errShutdown):
			msg = "execd is shutting down; the workspace was not " + verb
		}
		return toolResult(map[string]any{"workspace": *ws, "error": msg}, true), nil
	}
	out := map[string]any{"workspace": *ws, "status": verb}
	if verb == "reset" {
		out["filesDeleted"] = delFiles
	}
	return toolResult(out, false), nil
}
