package frontend

import (
	"context"
	"encoding/json"
	"fmt"

	"execd/internal/jsonrpc"
)

// Extensions are what a build serves beside execd's own tools, through the
// same pipeline: more tools (after execd's in tools/list), prompts,
// resources and completions, each declared in the capabilities only when
// given. Production execd has none; cmd/execd-conformance registers the
// fixtures of the official conformance suites here.
type Extensions struct {
	// Tools are listed after execd's own, in this order.
	Tools []Tool
	// Prompts, when not nil, declares the prompts capability.
	Prompts *Prompts
	// Resources are served beside the workspace files (always declared).
	// Nil means none.
	Resources *Resources
	// Completions declares completion/complete, which answers no values.
	Completions bool
}

// Tool is a tool served beside execd's own.
type Tool struct {
	// Name is the tool's name in tools/list and tools/call. Required and
	// unique.
	Name string
	// Definition is the rest of its tools/list entry (description,
	// inputSchema, …). The inputSchema's properties are the arguments it
	// takes: arguments are read by exact key, a case variant of a declared
	// one is refused, and with "additionalProperties": false so is any
	// other (args.go). A property with "x-mcp-header" is mirrored into
	// Mcp-Param-* by modern clients, and checked.
	Definition map[string]any
	// Needs lists the client capabilities a modern request must declare to
	// call the tool (-32021 otherwise). Nil needs none.
	Needs []string
	// Run serves a call; arguments is the arguments object ("{}" when the
	// call sent none). Results are JSON objects (a CallToolResult; maps get
	// the modern era's resultType and serverInfo added). A nil result and a
	// nil error mean Run saw ctx end; the client then gets no answer if it
	// cancelled, an error otherwise.
	Run func(ctx context.Context, c *Call, arguments json.RawMessage) (any, *jsonrpc.Error)
}

// Prompts are the prompts a build serves.
type Prompts struct {
	// List are the entries of prompts/list.
	List []map[string]any
	// Get serves prompts/get of name with its string arguments.
	Get func(ctx context.Context, c *Call, name string, args map[string]string) (any, *jsonrpc.Error)
}

// Resources are the resources a build serves.
type Resources struct {
	// List and Templates are the entries of resources/list and
	// resources/templates/list.
	List, Templates []map[string]any
	// Read serves resources/read of a uri that is not a workspace file's;
	// a nil result and a nil error mean it does not know uri, which is
	// then answered as the era's resource-not-found error.
	Read func(ctx context.Context, c *Call, uri string) (any, *jsonrpc.Error)
}

// features are the optional method families a build declares.
type features struct {
	prompts     *Prompts
	resources   *Resources
	completions bool
}

// extend registers ext's tools and features.
func (s *Server) extend(ext *Extensions) error {
	if ext == nil {
		return nil
	}
	for _, t := range ext.Tools {
		if t.Run == nil {
			return fmt.Errorf("frontend: tool %q has no Run", t.Name)
		}
		run := t.Run
		if err := s.tools.add(&tool{name: t.Name, def: t.Definition, needs: t.Needs,
			run: func(ctx context.Context, c *Call, _ arguments) (any, *jsonrpc.Error) {
				raw := c.meta.head.arguments
				if jsonrpc.IsNull(raw) {
					raw = json.RawMessage("{}")
				}
				return run(ctx, c, raw)
			}}); err != nil {
			return err
		}
	}
	s.feat = features{prompts: ext.Prompts, resources: ext.Resources, completions: ext.Completions}
	return nil
}

// addFeatureMethods adds the methods of the declared features. Undeclared
// features have no handlers, so they answer -32601 (the capabilities match
// the handlers: docs/specification/2026-07-28/server/discover.mdx).
func (s *Server) addFeatureMethods(m map[string]method) {
	if ps := s.feat.prompts; ps != nil {
		m["prompts/list"] = method{legacy: true, modern: true, h: func(_ context.Context, c *Call) (any, *jsonrpc.Error) {
			return s.cacheable(c, map[string]any{"prompts": ps.List}, cachePublic), nil
		}}
		m["prompts/get"] = method{legacy: true, modern: true, h: func(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
			var p struct {
				Name      string            `json:"name"`
				Arguments map[string]string `json:"arguments"`
			}
			if err := json.Unmarshal(c.params, &p); err != nil || p.Name == "" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: prompts/get needs a prompt name")
			}
			return ps.Get(ctx, c, p.Name, p.Arguments)
		}}
	}
	// The workspace files are resources in every build (files.go); the
	// fixtures' resources join them.
	m["resources/list"] = method{legacy: true, modern: true, h: s.listResources}
	m["resources/templates/list"] = method{legacy: true, modern: true, h: s.resourceTemplates}
	m["resources/read"] = method{legacy: true, modern: true, h: s.readResource}
	if s.feat.resources != nil {
		// The fixtures' resources may be subscribed to (legacy era only).
		noop := func(context.Context, *Call) (any, *jsonrpc.Error) { return struct{}{}, nil }
		m["resources/subscribe"] = method{legacy: true, h: noop}
		m["resources/unsubscribe"] = method{legacy: true, h: noop}
	}
	if s.feat.completions {
		m["completion/complete"] = method{legacy: true, modern: true, h: func(context.Context, *Call) (any, *jsonrpc.Error) {
			return map[string]any{"completion": map[string]any{"values": []string{}, "total": 0, "hasMore": false}}, nil
		}}
	}
}

// Cache scopes of cacheable results.
type cacheScope int

const (
	// cachePublic: the same for every caller, and stable: five minutes.
	cachePublic cacheScope = iota
	// cachePrivate: for this principal only, and stale at once (the
	// workspace files change with every run).
	cachePrivate
)

// cacheable adds the modern era's cache hints to a complete list or read
// result (docs/specification/2026-07-28/server/utilities/caching.mdx); an
// input_required result carries none.
func (s *Server) cacheable(c *Call, res any, scope cacheScope) any {
	m, ok := res.(map[string]any)
	if !ok || c.era != EraModern {
		return res
	}
	if _, has := m["resultType"]; has && m["resultType"] != "complete" {
		return res
	}
	if scope == cachePrivate {
		m["ttlMs"], m["cacheScope"] = 0, "private"
	} else {
		m["ttlMs"], m["cacheScope"] = 300000, "public"
	}
	return m
}
