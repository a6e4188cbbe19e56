package frontend

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"execd/internal/jsonrpc"
)

// The optional method families besides tools: resources, prompts and
// completions. Each is declared in the capabilities exactly when something
// is registered for it, and its methods answer -32601 otherwise (the
// capabilities match the handlers: docs/specification/2026-07-28/server/discover.mdx).

// Resources are resources a provider serves. Several providers may be
// registered (execd's workspace files, the conformance fixtures); their
// lists and templates are joined, and a read goes to the first provider
// that knows the URI.
type Resources struct {
	// Templates are entries of resources/templates/list.
	Templates []map[string]any
	// List returns the provider's entries of resources/list for the call.
	// Nil means none.
	List func(ctx context.Context, c *Call) []map[string]any
	// Read serves resources/read of uri. A nil result and a nil error mean
	// the provider does not serve uri. Required.
	Read func(ctx context.Context, c *Call, uri string) (any, *jsonrpc.Error)
	// Private: what the provider lists and reads depends on the caller's
	// principal and changes at any time (the modern era's cache hints say
	// private, stale at once); otherwise it is public and stable.
	Private bool
	// URIs describes the URIs the provider serves, for the error that
	// answers a URI no provider serves ("workspace://{workspace}/{path}").
	URIs string
	// Subscribable accepts resources/subscribe and /unsubscribe (legacy
	// era), which change nothing: nothing is ever pushed.
	Subscribable bool
}

// Prompts are the prompts a build serves.
type Prompts struct {
	// List are the entries of prompts/list.
	List []map[string]any
	// Get serves prompts/get of name with its string arguments.
	Get func(ctx context.Context, c *Call, name string, args map[string]string) (any, *jsonrpc.Error)
}

// features are what is registered beside the tools.
type features struct {
	mu          sync.RWMutex
	resources   []Resources
	prompts     *Prompts
	completions bool
}

// AddResources registers a resources provider.
func (s *Server) AddResources(r Resources) {
	s.feat.mu.Lock()
	s.feat.resources = append(s.feat.resources, r)
	s.feat.mu.Unlock()
}

// SetPrompts registers the prompts a build serves.
func (s *Server) SetPrompts(p Prompts) {
	s.feat.mu.Lock()
	s.feat.prompts = &p
	s.feat.mu.Unlock()
}

// EnableCompletions declares completion/complete, which answers no values.
func (s *Server) EnableCompletions() {
	s.feat.mu.Lock()
	s.feat.completions = true
	s.feat.mu.Unlock()
}

func (f *features) snapshot() (rs []Resources, ps *Prompts, completions bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.resources, f.prompts, f.completions
}

func (f *features) hasResources() bool {
	rs, _, _ := f.snapshot()
	return len(rs) > 0
}

func (f *features) hasPrompts() bool {
	_, ps, _ := f.snapshot()
	return ps != nil
}

func (f *features) hasCompletions() bool {
	_, _, c := f.snapshot()
	return c
}

func (f *features) subscribable() bool {
	rs, _, _ := f.snapshot()
	for _, r := range rs {
		if r.Subscribable {
			return true
		}
	}
	return false
}

// addFeatureMethods adds the methods of the optional families; each is
// served only while its family is registered.
func (s *Server) addFeatureMethods(m map[string]method) {
	f := &s.feat
	m["prompts/list"] = method{legacy: true, modern: true, when: f.hasPrompts, h: func(_ context.Context, c *Call) (any, *jsonrpc.Error) {
		_, ps, _ := f.snapshot()
		return s.cacheable(c, map[string]any{"prompts": ps.List}, cachePublic), nil
	}}
	m["prompts/get"] = method{legacy: true, modern: true, when: f.hasPrompts, h: func(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
		var p struct {
			Name      string            `json:"name"`
			Arguments map[string]string `json:"arguments"`
		}
		if err := json.Unmarshal(c.params, &p); err != nil || p.Name == "" {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: prompts/get needs a prompt name")
		}
		_, ps, _ := f.snapshot()
		return ps.Get(ctx, c, p.Name, p.Arguments)
	}}
	m["resources/list"] = method{legacy: true, modern: true, when: f.hasResources, h: s.listResources}
	m["resources/templates/list"] = method{legacy: true, modern: true, when: f.hasResources, h: s.resourceTemplates}
	m["resources/read"] = method{legacy: true, modern: true, when: f.hasResources, h: s.readResource}
	noop := func(context.Context, *Call) (any, *jsonrpc.Error) { return struct{}{}, nil }
	m["resources/subscribe"] = method{legacy: true, when: f.subscribable, h: noop}
	m["resources/unsubscribe"] = method{legacy: true, when: f.subscribable, h: noop}
	m["completion/complete"] = method{legacy: true, modern: true, when: f.hasCompletions, h: func(context.Context, *Call) (any, *jsonrpc.Error) {
		return map[string]any{"completion": map[string]any{"values": []string{}, "total": 0, "hasMore": false}}, nil
	}}
}

// The resources methods: the providers' entries joined.

func (s *Server) resourceTemplates(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	rs, _, _ := s.feat.snapshot()
	tpls := []map[string]any{}
	for _, r := range rs {
		tpls = append(tpls, r.Templates...)
	}
	return s.cacheable(c, map[string]any{"resourceTemplates": tpls}, cachePublic), nil
}

// listResources lists what every provider lists for the caller (it
// depends on the principal only, never on the connection).
func (s *Server) listResources(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	if !jsonrpc.IsNull(c.meta.head.cursor) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor (the list has one page)")
	}
	rs, _, _ := s.feat.snapshot()
	list := []map[string]any{}
	scope := cachePublic
	for _, r := range rs {
		if r.List != nil {
			list = append(list, r.List(ctx, c)...)
		}
		if r.Private {
			scope = cachePrivate
		}
	}
	return s.cacheable(c, map[string]any{"resources": list}, scope), nil
}

func (s *Server) readResource(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	uri := rawString(c.meta.head.uri)
	if uri == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: resources/read needs a uri")
	}
	rs, _, _ := s.feat.snapshot()
	var served []string
	for _, r := range rs {
		res, jerr := r.Read(ctx, c, uri)
		if jerr != nil {
			return nil, jerr
		}
		if res != nil {
			scope := cachePublic
			if r.Private {
				scope = cachePrivate
			}
			return s.cacheable(c, res, scope), nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if r.URIs != "" {
			served = append(served, r.URIs)
		}
	}
	return nil, ResourceNotFound(c, uri, ServerName+" serves "+strings.Join(served, " and ")+" URIs only")
}

// codeResourceNotFound is the 2025 revisions' error for an unknown
// resource (docs/specification/2025-11-25/server/resources.mdx, Error
// Handling); 2026-07-28 uses -32602 (SEP-2164).
const codeResourceNotFound = -32002

// ResourceNotFound is the era's answer to a resources/read of a resource
// that does not exist: why says why, after "Resource not found: ".
func ResourceNotFound(c *Call, uri, why string) *jsonrpc.Error {
	code := codeResourceNotFound
	if c.era == EraModern {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: "Resource not found: " + why, Data: map[string]any{"uri": uri}}
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
