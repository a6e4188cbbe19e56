package frontend

import (
	"context"
	"errors"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/workspace"
)

// The workspace tools: list_workspaces, reset_workspace, delete_workspace,
// checkpoint_workspace, restore_workspace, fork_workspace. Each names the
// workspace it acts on in the argument "workspace", mirrored into
// Mcp-Param-Workspace, so a load balancer that routes on that header
// sends it where the workspace lives.

func workspaceProp() map[string]any {
	return map[string]any{"type": "string", "x-mcp-header": "Workspace", "description": "The workspace id."}
}

var (
	annotationsReadOnly = map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
	annotationsDestroys = map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}
	annotationsAdds     = map[string]any{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}
)

// objectSchema is an inputSchema of the given properties, no others.
func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func (s *Server) listWorkspacesTool() *tool {
	return &tool{
		name: "list_workspaces",
		def: map[string]any{
			"title": "List workspaces",
			"description": "List your workspaces, most recently used first: for each, whether its interpreters are live (in memory) or hibernated (saved on disk, restored on the next call), " +
				"its languages, its checkpoints, whether a call is running, when it was last used, and the bytes it holds in memory, in files and in saved state.",
			"inputSchema": objectSchema(map[string]any{}),
			"outputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspaces": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}},
				"required":   []string{"workspaces"},
			},
			"annotations": annotationsReadOnly,
		},
		run: func(ctx context.Context, c *Call, _ arguments) (any, *jsonrpc.Error) {
			infos := s.exec.List(c.principal)
			list := make([]map[string]any, 0, len(infos))
			for _, in := range infos {
				list = append(list, describeWorkspace(in))
			}
			return toolResult(map[string]any{"workspaces": list}, false), nil
		},
	}
}

// describeWorkspace is one entry of list_workspaces.
func describeWorkspace(in workspace.Info) map[string]any {
	langs := in.Languages
	if langs == nil {
		langs = []string{}
	}
	interps := make([]map[string]any, 0, len(in.Interpreters))
	for _, it := range in.Interpreters {
		e := map[string]any{"language": it.Language, "live": it.Live}
		if it.Live {
			e["memoryBytes"] = it.MemoryBytes
		} else {
			e["imageBytes"] = it.ImageBytes
		}
		interps = append(interps, e)
	}
	cps := make([]map[string]any, 0, len(in.Checkpoints))
	for _, cp := range in.Checkpoints {
		e := map[string]any{"name": cp.Name, "bytes": cp.Bytes}
		if cp.Languages != nil {
			e["languages"] = cp.Languages
		} else {
			e["languages"] = []string{}
		}
		if !cp.Created.IsZero() {
			e["created"] = cp.Created.UTC().Format(time.RFC3339)
		}
		cps = append(cps, e)
	}
	state := "none" // no interpreter state kept: the next call starts fresh
	switch {
	case in.Live:
		state = "live"
	case in.Hibernated:
		state = "hibernated"
	}
	e := map[string]any{
		"workspace": in.ID, "state": state, "live": in.Live, "hibernated": in.Hibernated, "running": in.Running,
		"languages": langs, "interpreters": interps, "checkpoints": cps,
		"memoryBytes": in.MemoryBytes, "diskBytes": in.DiskBytes, "stateBytes": in.StateBytes,
	}
	if !in.LastUsed.IsZero() {
		e["lastUsed"] = in.LastUsed.UTC().Format(time.RFC3339)
	}
	return e
}

func (s *Server) resetWorkspaceTool() *tool {
	return &tool{
		name: "reset_workspace",
		def: map[string]any{
			"title":       "Reset a workspace",
			"description": "Drop a workspace's interpreter state (variables, functions). Files under /workspace are kept unless files is true. Checkpoints are kept.",
			"inputSchema": objectSchema(map[string]any{
				"workspace": workspaceProp(),
				"files":     map[string]any{"type": "boolean", "description": "Also delete the workspace's files."},
			}, "workspace"),
			"annotations": annotationsDestroys,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			files, err := args.boolArg("files")
			if err != nil {
				return toolError("", err.Error()), nil
			}
			delFiles := files != nil && *files
			return s.workspaceOp(ctx, args, "the workspace was not reset", func(ws string) (map[string]any, error) {
				if err := s.exec.Reset(ctx, c.principal, ws, delFiles); err != nil {
					return nil, err
				}
				return map[string]any{"status": "reset", "filesDeleted": delFiles}, nil
			})
		},
	}
}

func (s *Server) deleteWorkspaceTool() *tool {
	return &tool{
		name: "delete_workspace",
		def: map[string]any{
			"title":       "Delete a workspace",
			"description": "Delete a workspace: its interpreter state, all its files and its checkpoints.",
			"inputSchema": objectSchema(map[string]any{"workspace": workspaceProp()}, "workspace"),
			"annotations": annotationsDestroys,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			return s.workspaceOp(ctx, args, "the workspace was not deleted", func(ws string) (map[string]any, error) {
				if err := s.exec.Delete(ctx, c.principal, ws); err != nil {
					return nil, err
				}
				return map[string]any{"status": "deleted"}, nil
			})
		},
	}
}

func (s *Server) checkpointWorkspaceTool() *tool {
	return &tool{
		name: "checkpoint_workspace",
		def: map[string]any{
			"title": "Checkpoint a workspace",
			"description": "Save a workspace as it is now — every interpreter's variables, functions and imports, and all its files — under a name, to come back to later with restore_workspace. " +
				"The workspace carries on unchanged. Returns the checkpoint's name (a generated one such as \"cp-1\" when you give none).",
			"inputSchema": objectSchema(map[string]any{
				"workspace": workspaceProp(),
				"name":      map[string]any{"type": "string", "description": "A name for the checkpoint (1-64 characters of A-Z a-z 0-9 . _ -). Omit to get a generated one."},
			}, "workspace"),
			"outputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspace": map[string]any{"type": "string"}, "checkpoint": map[string]any{"type": "string"}, "error": map[string]any{"type": "string"}},
				"required":   []string{"workspace"},
			},
			"annotations": annotationsAdds,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			name, err := args.stringArg("name")
			if err != nil {
				return toolError("", err.Error()), nil
			}
			return s.workspaceOp(ctx, args, "no checkpoint was made", func(ws string) (map[string]any, error) {
				cp, err := s.exec.Checkpoint(ctx, c.principal, ws, deref(name))
				if err != nil {
					return nil, err
				}
				return map[string]any{"checkpoint": cp}, nil
			})
		},
	}
}

func (s *Server) restoreWorkspaceTool() *tool {
	return &tool{
		name: "restore_workspace",
		def: map[string]any{
			"title": "Restore a checkpoint",
			"description": "Put a workspace back exactly as it was at one of its checkpoints: its interpreters' state and its files. " +
				"What changed since is lost; the checkpoint itself is kept, so you can restore it again.",
			"inputSchema": objectSchema(map[string]any{
				"workspace":  workspaceProp(),
				"checkpoint": map[string]any{"type": "string", "description": "The checkpoint's name, as checkpoint_workspace returned it or list_workspaces shows it."},
			}, "workspace", "checkpoint"),
			"annotations": annotationsDestroys,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			cp, err := args.stringArg("checkpoint")
			if err != nil {
				return toolError("", err.Error()), nil
			}
			return s.workspaceOp(ctx, args, "the workspace was not restored", func(ws string) (map[string]any, error) {
				if cp == nil || *cp == "" {
					return nil, errors.New("missing argument checkpoint: the name of the checkpoint to restore")
				}
				if err := s.exec.RestoreCheckpoint(ctx, c.principal, ws, *cp); err != nil {
					return nil, err
				}
				return map[string]any{"status": "restored", "checkpoint": *cp}, nil
			})
		},
	}
}

func (s *Server) forkWorkspaceTool() *tool {
	return &tool{
		name: "fork_workspace",
		def: map[string]any{
			"title": "Fork a workspace",
			"description": "Make a new workspace that starts as a copy of this one: its interpreters' state and its files. Change either afterwards and the other does not notice; " +
				"random numbers differ between them. Returns the new workspace's id in workspace. The fork is created on the server that holds the source workspace " +
				"(the call is routed by workspace, not by new_workspace).",
			"inputSchema": objectSchema(map[string]any{
				"workspace":     workspaceProp(),
				"new_workspace": map[string]any{"type": "string", "description": "The new workspace's id (1-64 characters of A-Z a-z 0-9 . _ -); it must not exist yet. Omit to get a generated one."},
			}, "workspace"),
			"outputSchema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"workspace": map[string]any{"type": "string"}, "forkedFrom": map[string]any{"type": "string"}, "error": map[string]any{"type": "string"}},
				"required":   []string{"workspace"},
			},
			"annotations": annotationsAdds,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			newWS, err := args.stringArg("new_workspace")
			if err != nil {
				return toolError("", err.Error()), nil
			}
			return s.workspaceOp(ctx, args, "no fork was made", func(ws string) (map[string]any, error) {
				id, err := s.exec.Fork(ctx, c.principal, ws, deref(newWS))
				if err != nil {
					return nil, err
				}
				return map[string]any{"workspace": id, "forkedFrom": ws}, nil
			})
		},
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// toolError is an isError result naming the workspace (when known) and
// what went wrong.
func toolError(ws, msg string) map[string]any {
	out := map[string]any{"error": msg}
	if ws != "" {
		out["workspace"] = ws
	}
	return toolResult(out, true)
}

// workspaceOp runs op on the workspace the arguments name. The operations
// wait their turn in the workspace's queue like any call: a client that
// cancels while one waits gets no answer (the pipeline decides), and
// shutdown says why, ending in notDone ("the workspace was not reset").
// op's result is the structured content, to which the workspace is added
// unless op named one itself (a fork names the new one).
func (s *Server) workspaceOp(ctx context.Context, args arguments, notDone string, op func(ws string) (map[string]any, error)) (any, *jsonrpc.Error) {
	ws, err := args.stringArg("workspace")
	if err != nil {
		return toolError("", err.Error()), nil
	}
	if ws == nil || *ws == "" {
		return toolError("", "missing argument workspace"), nil
	}
	out, err := op(*ws)
	if err != nil {
		var we *workspace.Error
		msg := err.Error()
		switch {
		case errors.As(err, &we):
			msg = we.Msg
		case errors.Is(context.Cause(ctx), errShutdown):
			msg = "execd is shutting down; " + notDone
		}
		return toolError(*ws, msg), nil
	}
	if _, ok := out["workspace"]; !ok {
		out["workspace"] = *ws
	}
	return toolResult(out, false), nil
}
