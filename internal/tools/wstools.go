package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
	"execd/internal/workspace"
)

// The workspace tools: list_workspaces, reset_workspace, delete_workspace,
// checkpoint_workspace, restore_workspace, fork_workspace. Each names the
// workspace it acts on in the argument "workspace", mirrored into
// Mcp-Param-Workspace, so a load balancer that routes on that header
// sends it where the workspace lives.

var (
	annotationsReadOnly = map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
	annotationsDestroys = map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}
	annotationsAdds     = map[string]any{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}
)

var annotationsRun = map[string]any{
	"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false,
}

// wsArgs are the arguments of a tool that names only its workspace.
type wsArgs struct {
	Workspace string `json:"workspace" header:"Workspace" desc:"The workspace id."`
}

// listArgs are list_workspaces' arguments.
type listArgs struct {
	Cursor *string `json:"cursor,omitempty" desc:"The nextCursor of the previous page; none for the first."`
	Limit  *int    `json:"limit,omitempty" minimum:"1" maximum:"500" desc:"Workspaces per page (default 100)."`
}

// listPageDefault is list_workspaces' page when no limit is given.
const listPageDefault = 100

func (t *tools) addListWorkspaces() error {
	return frontend.AddTool(t.srv, frontend.Tool[listArgs]{
		Name:  "list_workspaces",
		Title: "List workspaces",
		Description: "List your workspaces, most recently used first: for each, whether its interpreters are live (in memory) or hibernated (saved on disk, restored on the next call), " +
			"its languages, its checkpoints, whether a call is running, when it was last used, and the bytes it holds in memory, in files and in saved state. " +
			"A page at a time: when nextCursor is in the result, pass it as cursor for the next page.",
		OutputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"workspaces": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				"nextCursor": map[string]any{"type": "string"},
			},
			"required": []string{"workspaces"},
		},
		Annotations: annotationsReadOnly,
		Run: func(ctx context.Context, c *frontend.Call, in listArgs) (any, *jsonrpc.Error) {
			limit := listPageDefault
			if in.Limit != nil {
				limit = *in.Limit
			}
			var from *workspace.ListFrom
			if in.Cursor != nil {
				var ok bool
				if from, ok = parseListCursor(*in.Cursor); !ok {
					return toolError("", "cursor is not a nextCursor list_workspaces gave; call it without cursor for the first page"), nil
				}
			}
			infos, more := t.exec.ListPage(c.Principal(), from, limit)
			list := make([]map[string]any, 0, len(infos))
			for _, in := range infos {
				list = append(list, describeWorkspace(in))
			}
			out := map[string]any{"workspaces": list}
			if more {
				last := infos[len(infos)-1]
				out["nextCursor"] = listCursor(last.LastUsed, last.ID)
			}
			return frontend.StructuredResult(out, false), nil
		},
	})
}

// listCursor names the place in list_workspaces' order after the
// workspace id, last used at used: base64url of "<unix nanoseconds>.<id>".
func listCursor(used time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(used.UnixNano(), 10) + "." + id))
}

// parseListCursor reads a listCursor.
func parseListCursor(s string) (*workspace.ListFrom, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	ns, id, found := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !found || err != nil || workspace.ValidateID(id) != nil {
		return nil, false
	}
	return &workspace.ListFrom{LastUsed: time.Unix(0, n), ID: id}, true
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
	if in.Packages != nil {
		e["packages"] = describePackages(in.Packages, true)
	}
	return e
}

// resetArgs are reset_workspace's arguments.
type resetArgs struct {
	Workspace string `json:"workspace" header:"Workspace" desc:"The workspace id."`
	Files     *bool  `json:"files,omitempty" desc:"Also delete the workspace's files."`
}

func (t *tools) addResetWorkspace() error {
	return frontend.AddTool(t.srv, frontend.Tool[resetArgs]{
		Name:        "reset_workspace",
		Title:       "Reset a workspace",
		Description: "Drop a workspace's interpreter state (variables, functions). Files under /workspace are kept unless files is true. Checkpoints are kept.",
		Annotations: annotationsDestroys,
		Run: func(ctx context.Context, c *frontend.Call, in resetArgs) (any, *jsonrpc.Error) {
			delFiles := in.Files != nil && *in.Files
			return t.workspaceOp(ctx, c, in.Workspace, "the workspace was not reset", func(ws string) (map[string]any, error) {
				t.endParked(c.Principal(), ws, "reset")
				if err := t.exec.Reset(ctx, c.Principal(), ws, delFiles); err != nil {
					return nil, err
				}
				return map[string]any{"status": "reset", "filesDeleted": delFiles}, nil
			})
		},
	})
}

func (t *tools) addDeleteWorkspace() error {
	return frontend.AddTool(t.srv, frontend.Tool[wsArgs]{
		Name:        "delete_workspace",
		Title:       "Delete a workspace",
		Description: "Delete a workspace: its interpreter state, all its files and its checkpoints.",
		Annotations: annotationsDestroys,
		Run: func(ctx context.Context, c *frontend.Call, in wsArgs) (any, *jsonrpc.Error) {
			return t.workspaceOp(ctx, c, in.Workspace, "the workspace was not deleted", func(ws string) (map[string]any, error) {
				t.endParked(c.Principal(), ws, "deleted")
				if err := t.exec.Delete(ctx, c.Principal(), ws); err != nil {
					return nil, err
				}
				return map[string]any{"status": "deleted"}, nil
			})
		},
	})
}

// checkpointArgs are checkpoint_workspace's arguments.
type checkpointArgs struct {
	Workspace string  `json:"workspace" header:"Workspace" desc:"The workspace id."`
	Name      *string `json:"name,omitempty" desc:"A name for the checkpoint (1-64 characters of A-Z a-z 0-9 . _ -). Omit to get a generated one."`
}

func (t *tools) addCheckpointWorkspace() error {
	return frontend.AddTool(t.srv, frontend.Tool[checkpointArgs]{
		Name:  "checkpoint_workspace",
		Title: "Checkpoint a workspace",
		Description: "Save a workspace as it is now — every interpreter's variables, functions and imports, and all its files — under a name, to come back to later with restore_workspace. " +
			"The workspace carries on unchanged. Returns the checkpoint's name (a generated one such as \"cp-1\" when you give none).",
		OutputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"workspace": map[string]any{"type": "string"}, "checkpoint": map[string]any{"type": "string"}, "error": map[string]any{"type": "string"}},
			"required":   []string{"workspace"},
		},
		Annotations: annotationsAdds,
		Run: func(ctx context.Context, c *frontend.Call, in checkpointArgs) (any, *jsonrpc.Error) {
			return t.workspaceOp(ctx, c, in.Workspace, "no checkpoint was made", func(ws string) (map[string]any, error) {
				cp, err := t.exec.Checkpoint(ctx, c.Principal(), ws, deref(in.Name))
				if err != nil {
					return nil, err
				}
				return map[string]any{"checkpoint": cp}, nil
			})
		},
	})
}

// restoreArgs are restore_workspace's arguments.
type restoreArgs struct {
	Workspace  string `json:"workspace" header:"Workspace" desc:"The workspace id."`
	Checkpoint string `json:"checkpoint" desc:"The checkpoint's name, as checkpoint_workspace returned it or list_workspaces shows it." missing:"the name of the checkpoint to restore"`
}

func (t *tools) addRestoreWorkspace() error {
	return frontend.AddTool(t.srv, frontend.Tool[restoreArgs]{
		Name:  "restore_workspace",
		Title: "Restore a checkpoint",
		Description: "Put a workspace back exactly as it was at one of its checkpoints: its interpreters' state and its files. " +
			"What changed since is lost; the checkpoint itself is kept, so you can restore it again.",
		Annotations: annotationsDestroys,
		Run: func(ctx context.Context, c *frontend.Call, in restoreArgs) (any, *jsonrpc.Error) {
			return t.workspaceOp(ctx, c, in.Workspace, "the workspace was not restored", func(ws string) (map[string]any, error) {
				if in.Checkpoint == "" {
					return nil, errors.New("missing argument checkpoint: the name of the checkpoint to restore")
				}
				if err := t.exec.RestoreCheckpoint(ctx, c.Principal(), ws, in.Checkpoint); err != nil {
					return nil, err
				}
				return map[string]any{"status": "restored", "checkpoint": in.Checkpoint}, nil
			})
		},
		// A missing checkpoint is told with the workspace it was meant for.
		Invalid: func(in restoreArgs, msg string) any { return toolError(in.Workspace, msg) },
	})
}

// forkArgs are fork_workspace's arguments.
type forkArgs struct {
	Workspace    string  `json:"workspace" header:"Workspace" desc:"The workspace id."`
	NewWorkspace *string `json:"new_workspace,omitempty" desc:"The new workspace's id (1-64 characters of A-Z a-z 0-9 . _ -); it must not exist yet. Omit to get a generated one."`
}

func (t *tools) addForkWorkspace() error {
	return frontend.AddTool(t.srv, frontend.Tool[forkArgs]{
		Name:  "fork_workspace",
		Title: "Fork a workspace",
		Description: "Make a new workspace that starts as a copy of this one: its interpreters' state and its files. Change either afterwards and the other does not notice; " +
			"random numbers differ between them. Returns the new workspace's id in workspace. The fork is created on the server that holds the source workspace " +
			"(the call is routed by workspace, not by new_workspace).",
		OutputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"workspace": map[string]any{"type": "string"}, "forkedFrom": map[string]any{"type": "string"}, "error": map[string]any{"type": "string"}},
			"required":   []string{"workspace"},
		},
		Annotations: annotationsAdds,
		Run: func(ctx context.Context, c *frontend.Call, in forkArgs) (any, *jsonrpc.Error) {
			return t.workspaceOp(ctx, c, in.Workspace, "no fork was made", func(ws string) (map[string]any, error) {
				id, err := t.exec.Fork(ctx, c.Principal(), ws, deref(in.NewWorkspace))
				if err != nil {
					return nil, err
				}
				return map[string]any{"workspace": id, "forkedFrom": ws}, nil
			})
		},
	})
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
	return frontend.StructuredResult(out, true)
}

// workspaceOp runs op on the workspace ws. The operations
// wait their turn in the workspace's queue like any call: a client that
// cancels while one waits gets no answer (the pipeline decides), and
// shutdown says why, ending in notDone ("the workspace was not reset").
// op's result is the structured content, to which the workspace is added
// unless op named one itself (a fork names the new one).
func (t *tools) workspaceOp(ctx context.Context, c *frontend.Call, ws, notDone string, op func(ws string) (map[string]any, error)) (any, *jsonrpc.Error) {
	if ws == "" {
		return toolError("", "missing argument workspace"), nil
	}
	c.Tag("workspace", ws)
	out, err := op(ws)
	if err != nil {
		var we *workspace.Error
		msg := err.Error()
		switch {
		case errors.As(err, &we):
			msg = we.Msg
		case errors.Is(context.Cause(ctx), frontend.ErrShutdown):
			msg = "execd is shutting down; " + notDone
		}
		return toolError(ws, msg), nil
	}
	if _, ok := out["workspace"]; !ok {
		out["workspace"] = ws
	}
	return frontend.StructuredResult(out, false), nil
}
