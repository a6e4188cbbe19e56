package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
	"execd/internal/packages"
	"execd/internal/workspace"
)

// install_packages: npm packages for JavaScript, pure-Python wheels for
// Python, installed into a workspace by the host (internal/packages via
// workspace.Installer). Its arguments hold a list, which the typed
// registry does not derive, so the tool reads them itself.

// installArgs are install_packages' arguments.
type installArgs struct {
	Workspace *string  `json:"workspace"`
	Language  string   `json:"language"`
	Packages  []string `json:"packages"`
}

// maxInstallSpecs bounds one call's list.
const maxInstallSpecs = workspace.MaxInstallSpecs

func (t *tools) addInstallPackages() error {
	inst := t.opts.Packages
	if inst == nil {
		return nil
	}
	langs := []string{}
	for _, l := range t.opts.Languages {
		if l == "javascript" || l == "python" {
			langs = append(langs, l)
		}
	}
	return frontend.AddTool(t.srv, frontend.Tool[json.RawMessage]{
		Name:  "install_packages",
		Title: "Install packages",
		Description: "Install packages into a workspace: npm packages for javascript (\"dayjs\", \"zod@^3\", \"@scope/pkg@1.2.3\"), " +
			"pure-Python wheels for python (\"python-slugify\", \"attrs>=23,<25\"; packages with C extensions such as numpy cannot be installed). " +
			"execd fetches and verifies them itself (the code's network policy does not apply) and records the versions in /workspace/" + workspace.LockPath +
			", so forks, checkpoints and restarts keep them. Then `import x from \"pkg\"` / `require(\"pkg\")` (JavaScript) or `import pkg` (Python) works in execute_code. " +
			"Code can also install: a bare JavaScript import installs on first use, Python has `%pip install name` and `from execd import install`. " +
			"Returns what was installed (name, version, bytes) or why not.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"workspace": map[string]any{"type": "string", "x-mcp-header": "Workspace",
					"description": "The workspace to install into: the id a previous result returned, or a name of your choice. Omit to create a new one."},
				"language": map[string]any{"type": "string", "enum": langs, "description": "javascript (npm) or python (pure wheels)."},
				"packages": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1, "maxItems": maxInstallSpecs,
					"description": "npm specifiers (name, name@range) or PEP 508 requirements (name, name==1.2, name>=1)."},
			},
			"required":             []string{"language", "packages"},
			"additionalProperties": false,
		},
		OutputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"workspace": map[string]any{"type": "string"},
				"language":  map[string]any{"type": "string"},
				"installed": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				"packages":  map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				"error":     map[string]any{"type": "string"},
				"code":      map[string]any{"type": "string"},
			},
			"required": []string{"workspace"},
		},
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true},
		Run: func(ctx context.Context, c *frontend.Call, raw json.RawMessage) (any, *jsonrpc.Error) {
			var in installArgs
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return toolError("", "install_packages takes {workspace?, language, packages: [names]}: "+err.Error()), nil
			}
			ws := deref(in.Workspace)
			switch {
			case in.Language == "":
				return toolError(ws, "missing argument language: one of "+strings.Join(langs, ", ")), nil
			case len(in.Packages) == 0:
				return toolError(ws, "missing argument packages: the names to install, such as [\"dayjs\"]"), nil
			case len(in.Packages) > maxInstallSpecs:
				return toolError(ws, fmt.Sprintf("at most %d packages per call", maxInstallSpecs)), nil
			}
			if ws == "" {
				ws = t.exec.NewID()
			}
			c.Tag("workspace", ws)
			res, err := inst.InstallPackages(ctx, c.Principal(), ws, in.Language, in.Packages)
			if err != nil {
				out := map[string]any{"error": err.Error(), "workspace": ws, "language": in.Language}
				var we *workspace.Error
				var pe *packages.Error
				switch {
				case errors.As(err, &pe):
					out["code"] = string(pe.Code)
					out["error"] = pe.Message
				case errors.As(err, &we):
					out["error"] = we.Msg
				case errors.Is(context.Cause(ctx), frontend.ErrShutdown):
					out["error"] = "execd is shutting down; nothing was installed"
				}
				return frontend.StructuredResult(out, true), nil
			}
			return frontend.StructuredResult(map[string]any{
				"workspace": ws, "language": res.Language,
				"installed": describePackages(res.Added, true), "packages": describePackages(res.Packages, true),
			}, false), nil
		},
	})
}

// describePackages is a list of packages as the tools show them.
func describePackages(ps []workspace.Package, withLanguage bool) []map[string]any {
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		e := map[string]any{"name": p.Name, "version": p.Version}
		if withLanguage {
			e["language"] = p.Language
		}
		if p.Bytes > 0 {
			e["bytes"] = p.Bytes
		}
		if p.Direct {
			e["direct"] = true
		}
		out = append(out, e)
	}
	return out
}
