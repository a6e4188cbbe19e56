package frontend

import (
	"context"
	"encoding/json"

	"execd/internal/jsonrpc"
)

// promptSet and resourceSet hold prompts and resources. Production execd
// declares neither; the conformance build registers its fixtures in them.
type promptSet struct {
	list []map[string]any
	get  func(ctx context.Context, c *call, name string, args map[string]string) (any, *jsonrpc.Error)
}

type resourceSet struct {
	list      []map[string]any
	templates []map[string]any
	read      func(ctx context.Context, c *call, uri string) (any, *jsonrpc.Error)
}

// addFeatureMethods adds the methods of the declared optional features.
// Undeclared features have no handlers, so they answer -32601 (D-4).
func (s *Server) addFeatureMethods(m map[string]method) {
	if ps := s.feat.prompts; ps != nil {
		m["prompts/list"] = method{legacy: true, modern: true, h: func(_ context.Context, c *call) (any, *jsonrpc.Error) {
			return s.cacheable(c, map[string]any{"prompts": ps.list}), nil
		}}
		m["prompts/get"] = method{legacy: true, modern: true, h: func(ctx context.Context, c *call) (any, *jsonrpc.Error) {
			var p struct {
				Name      string            `json:"name"`
				Arguments map[string]string `json:"arguments"`
			}
			if err := json.Unmarshal(c.params, &p); err != nil || p.Name == "" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: prompts/get needs a prompt name")
			}
			return ps.get(ctx, c, p.Name, p.Arguments)
		}}
	}
	if rs := s.feat.resources; rs != nil {
		m["resources/list"] = method{legacy: true, modern: true, h: func(_ context.Context, c *call) (any, *jsonrpc.Error) {
			return s.cacheable(c, map[string]any{"resources": rs.list}), nil
		}}
		m["resources/templates/list"] = method{legacy: true, modern: true, h: func(_ context.Context, c *call) (any, *jsonrpc.Error) {
			return s.cacheable(c, map[string]any{"resourceTemplates": rs.templates}), nil
		}}
		m["resources/read"] = method{legacy: true, modern: true, h: func(ctx context.Context, c *call) (any, *jsonrpc.Error) {
			var p struct {
				URI string `json:"uri"`
			}
			if err := json.Unmarshal(c.params, &p); err != nil || p.URI == "" {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: resources/read needs a uri")
			}
			res, jerr := rs.read(ctx, c, p.URI)
			if jerr != nil {
				return nil, jerr
			}
			return s.cacheable(c, res), nil
		}}
		noop := func(context.Context, *call) (any, *jsonrpc.Error) { return struct{}{}, nil }
		m["resources/subscribe"] = method{legacy: true, h: noop}
		m["resources/unsubscribe"] = method{legacy: true, h: noop}
	}
	if s.feat.completes {
		m["completion/complete"] = method{legacy: true, modern: true, h: func(context.Context, *call) (any, *jsonrpc.Error) {
			return map[string]any{"completion": map[string]any{"values": []string{}, "total": 0, "hasMore": false}}, nil
		}}
	}
}

// cacheable adds the modern era's cache hints to a list or read result.
func (s *Server) cacheable(c *call, res any) any {
	m, ok := res.(map[string]any)
	if !ok || c.era != EraModern {
		return res
	}
	if _, has := m["resultType"]; has && m["resultType"] != "complete" {
		return res
	}
	m["ttlMs"] = 300000
	m["cacheScope"] = "public"
	return m
}
