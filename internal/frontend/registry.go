package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"execd/internal/jsonrpc"
)

// The tool registry: every tool, execd's own (internal/tools) and the
// conformance fixtures' alike, is registered with AddTool. A tool's
// arguments are a Go struct; its inputSchema is derived from the struct,
// and a call's arguments are read by exact key (args.go) and then decoded
// into the struct, field by field, before the handler runs.

// Tool is a tool's tools/list entry and its handler. In is the type its
// arguments decode into: a struct (the inputSchema is derived from it; see
// AddTool), or json.RawMessage for a handler that reads the arguments
// object itself (InputSchema is then required).
type Tool[In any] struct {
	// Name is the tool's name in tools/list and tools/call. Required and
	// unique.
	Name string
	// Title and Description are shown to the person and the model.
	// Description is required (clients drop a tool without one).
	Title, Description string
	// InputSchema is the schema of a json.RawMessage tool, as it is. For a
	// struct it must be nil.
	InputSchema map[string]any
	// Properties are merged into the derived properties of a struct tool
	// by name: what only the running server knows (an enum of languages).
	Properties map[string]map[string]any
	// OutputSchema and Annotations are listed as given; nil means none.
	OutputSchema, Annotations map[string]any
	// Needs lists the client capabilities a modern request must declare to
	// call the tool (-32021 otherwise). Nil needs none.
	Needs []string
	// Tasks says whether a call may become a task (tasks.go). The zero
	// value, TaskNever, means it is always answered in-line.
	Tasks TaskSupport
	// Run serves a call. Results are CallToolResults: a map (the modern
	// era's resultType and serverInfo are added), a struct marshalled by
	// encoding/json, or an EncodedResult. A nil result and a nil error mean
	// Run saw ctx end; the client then gets no answer if it cancelled, an
	// error otherwise. Required.
	Run func(ctx context.Context, c *Call, in In) (any, *jsonrpc.Error)
	// Invalid shapes the isError result of arguments that do not fit In:
	// in holds the arguments that did, msg says what is wrong ("missing
	// argument path: …", "argument files must be a boolean"). Nil means
	// StructuredResult({"error": msg}, true).
	Invalid func(in In, msg string) any
}

// AddTool registers t; tools/list lists tools in the order they were
// added. It fails for an empty or taken name, a missing Run or
// Description, or an In the schema cannot be derived from.
//
// A struct In declares each argument as an exported field: the key is the
// field's json tag name; a field without ",omitempty" is required. Field
// types are string, bool, int, int64 and float64, or pointers to them
// (an argument that is absent or null leaves the field nil). Tags add to
// the property's schema:
//
//	desc:"…"          description
//	enum:"a,b"        enum of strings
//	minimum:"1"       minimum (integers)
//	maximum:"9"       maximum (integers)
//	header:"Name"     x-mcp-header: modern clients mirror the argument
//	                  into Mcp-Param-Name, which is checked
//	missing:"…"       what the error for a missing required argument adds
//	                  after "missing argument key: " (an enum says "one of
//	                  a, b" by itself)
//
// The schema is closed ("additionalProperties": false): an argument the
// struct does not declare is refused (-32602), as is a key given twice or
// one that differs from a declared one only in case (args.go).
func AddTool[In any](s *Server, t Tool[In]) error {
	if t.Run == nil {
		return fmt.Errorf("frontend: tool %q has no Run", t.Name)
	}
	if t.Description == "" {
		return fmt.Errorf("frontend: tool %q has no description", t.Name)
	}
	var zero In
	def := map[string]any{"description": t.Description}
	if t.Title != "" {
		def["title"] = t.Title
	}
	if t.OutputSchema != nil {
		def["outputSchema"] = t.OutputSchema
	}
	if t.Annotations != nil {
		def["annotations"] = t.Annotations
	}
	var run func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error)
	if _, raw := any(zero).(json.RawMessage); raw {
		if t.InputSchema == nil {
			return fmt.Errorf("frontend: tool %q reads raw arguments and needs an InputSchema", t.Name)
		}
		def["inputSchema"] = t.InputSchema
		run = func(ctx context.Context, c *Call, _ arguments) (any, *jsonrpc.Error) {
			raw := c.meta.head.arguments
			if jsonrpc.IsNull(raw) {
				raw = json.RawMessage("{}")
			}
			return t.Run(ctx, c, any(raw).(In))
		}
	} else {
		if t.InputSchema != nil {
			return fmt.Errorf("frontend: tool %q: the schema of a struct's arguments is derived, not given", t.Name)
		}
		fields, schema, err := deriveSchema(reflect.TypeOf(zero), t.Properties)
		if err != nil {
			return fmt.Errorf("frontend: tool %q: %w", t.Name, err)
		}
		def["inputSchema"] = schema
		invalid := t.Invalid
		if invalid == nil {
			invalid = func(_ In, msg string) any { return StructuredResult(map[string]any{"error": msg}, true) }
		}
		run = func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			var in In
			if msg := decodeArgs(args, fields, reflect.ValueOf(&in).Elem()); msg != "" {
				return invalid(in, msg), nil
			}
			return t.Run(ctx, c, in)
		}
	}
	return s.tools.add(&tool{name: t.Name, def: def, needs: t.Needs, tasks: t.Tasks, run: run})
}

// intOf is an integer schema value (a tag's int64, or an int given in
// Properties).
func intOf(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// field is one argument of a struct tool.
type field struct {
	key      string
	index    int
	kind     reflect.Kind // of the value (under a pointer)
	ptr      bool
	required bool
	min, max *int64
	missing  string // the text after "missing argument key: "
}

// deriveSchema reads a struct type's arguments and builds its inputSchema.
func deriveSchema(t reflect.Type, extra map[string]map[string]any) ([]field, map[string]any, error) {
	if t == nil || t.Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("arguments must be a struct or json.RawMessage, not %v", t)
	}
	props := map[string]any{}
	var required []string
	var fields []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return nil, nil, fmt.Errorf("field %s needs a json name", sf.Name)
		}
		f := field{key: name, index: i, required: !strings.Contains(","+opts+",", ",omitempty,")}
		typ := sf.Type
		if typ.Kind() == reflect.Pointer {
			f.ptr, typ = true, typ.Elem()
		}
		f.kind = typ.Kind()
		p := map[string]any{}
		switch f.kind {
		case reflect.String:
			p["type"] = "string"
		case reflect.Bool:
			p["type"] = "boolean"
		case reflect.Int, reflect.Int64:
			p["type"] = "integer"
		case reflect.Float64:
			p["type"] = "number"
		default:
			return nil, nil, fmt.Errorf("field %s: arguments of type %v are not supported", sf.Name, sf.Type)
		}
		if d := sf.Tag.Get("desc"); d != "" {
			p["description"] = d
		}
		if e := sf.Tag.Get("enum"); e != "" {
			p["enum"] = strings.Split(e, ",")
		}
		if h := sf.Tag.Get("header"); h != "" {
			p["x-mcp-header"] = h
		}
		for _, b := range []string{"minimum", "maximum"} {
			if v := sf.Tag.Get(b); v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("field %s: %s %q is not an integer", sf.Name, b, v)
				}
				p[b] = n
			}
		}
		for k, v := range extra[name] {
			p[k] = v
		}
		// The bounds, tagged or given in Properties, hold for the value.
		for _, b := range []struct {
			key string
			dst **int64
		}{{"minimum", &f.min}, {"maximum", &f.max}} {
			v, ok := p[b.key]
			if !ok {
				continue
			}
			n, isInt := intOf(v)
			if !isInt || (f.kind != reflect.Int && f.kind != reflect.Int64) {
				return nil, nil, fmt.Errorf("field %s: %s must be an integer, on an integer field", sf.Name, b.key)
			}
			*b.dst = &n
		}
		f.missing = sf.Tag.Get("missing")
		if enum, ok := p["enum"].([]string); ok && f.missing == "" {
			f.missing = "one of " + strings.Join(enum, ", ")
		}
		props[name] = p
		if f.required {
			required = append(required, name)
		}
		fields = append(fields, f)
	}
	for k := range extra {
		if _, ok := props[k]; !ok {
			return nil, nil, fmt.Errorf("properties name %q, which the arguments do not declare", k)
		}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required // in the order of the fields
	}
	return fields, schema, nil
}

// decodeArgs fills v, a struct of fields, from args. It returns what is
// wrong with the first argument that does not fit, or ""; the arguments
// that fit are decoded either way.
func decodeArgs(args arguments, fields []field, v reflect.Value) string {
	var bad string
	for _, f := range fields {
		if msg := decodeArg(args.get(f.key), f, v.Field(f.index)); msg != "" && bad == "" {
			bad = msg
		}
	}
	return bad
}

// decodeArg decodes one argument's raw value into its field.
func decodeArg(raw json.RawMessage, f field, dst reflect.Value) string {
	if jsonrpc.IsNull(raw) {
		if !f.required {
			return ""
		}
		if f.missing != "" {
			return "missing argument " + f.key + ": " + f.missing
		}
		return "missing argument " + f.key
	}
	val := dst
	if f.ptr {
		val = reflect.New(dst.Type().Elem()).Elem()
	}
	if f.kind == reflect.String {
		// The commonest argument, read without encoding/json's reflection:
		// raw is one valid JSON value, which jsonrpc.String decodes as
		// json.Unmarshal into a string would, or refuses when it is not a
		// string.
		s, ok := jsonrpc.String(raw)
		if !ok {
			val.SetZero()
			return "argument " + f.key + " must be " + f.what()
		}
		val.SetString(s)
	} else if json.Unmarshal(raw, val.Addr().Interface()) != nil {
		val.SetZero()
		return "argument " + f.key + " must be " + f.what()
	}
	if f.min != nil || f.max != nil {
		if n := val.Int(); f.min != nil && n < *f.min || f.max != nil && n > *f.max {
			val.SetZero()
			return "argument " + f.key + " must be " + f.what()
		}
	}
	if f.ptr {
		dst.Set(val.Addr())
	}
	return ""
}

// what says what a field's value must be, for its error.
func (f field) what() string {
	switch f.kind {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Float64:
		return "a number"
	}
	switch {
	case f.min != nil && f.max != nil:
		return fmt.Sprintf("an integer from %d to %d", *f.min, *f.max)
	case f.min != nil:
		return fmt.Sprintf("an integer of at least %d", *f.min)
	case f.max != nil:
		return fmt.Sprintf("an integer of at most %d", *f.max)
	}
	return "an integer"
}

// tool is one entry of tools/list.
type tool struct {
	name string
	def  map[string]any
	// schema and mirrors are read from def's inputSchema: the declared
	// arguments, and those a modern client mirrors into Mcp-Param-*.
	schema  argSchema
	mirrors []mirror
	// needs lists client capabilities a modern request must declare to
	// call the tool (-32021).
	needs []string
	tasks TaskSupport
	run   func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error)
	// describe, when set (SetDescriber), is the description for the
	// caller's principal; def's is then the fallback nobody is shown.
	describe func(principal string) string
}

// mirror is an argument declared with "x-mcp-header".
type mirror struct{ header, arg string }

// toolSet keeps tools in tools/list order, and tools/list's result per
// era, encoded once after each change.
type toolSet struct {
	mu      sync.RWMutex
	list    []*tool
	byName  map[string]*tool
	encoded [3]preEncoded // by listKind; nil: encode again
	// mine is the lists of a set with a describer (SetDescriber), by
	// kind and principal: nil or empty, encode again.
	mine map[principalList]preEncoded
	// described counts the tools with a describer.
	described int
}

// principalList names one principal's tools/list of a kind.
type principalList struct {
	kind      listKind
	principal string
}

// maxPrincipalLists bounds toolSet.mine: past it, the lists are encoded
// afresh (principals come from the tokens file, so this is a guard).
const maxPrincipalLists = 1024

// changed forgets the encoded lists. ts.mu is held.
func (ts *toolSet) changed() {
	ts.encoded = [3]preEncoded{}
	ts.mine = nil
}

// listKind is which tools/list a request gets: the modern one, the legacy
// one, or 2025-11-25's, which says which tools run as tasks.
type listKind int

const (
	listLegacy listKind = iota
	listModern
	listLegacyTasks
)

var errToolName = errors.New("the name is empty, too long, taken, or not of A-Z a-z 0-9 _ . -")

func (ts *toolSet) add(t *tool) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !validToolName(t.name) || ts.byName[t.name] != nil {
		return fmt.Errorf("frontend: tool %q: %w", t.name, errToolName)
	}
	t.def["name"] = t.name
	in, _ := t.def["inputSchema"].(map[string]any)
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
	ts.changed()
	return nil
}

// validToolName: 1-128 characters of A-Z a-z 0-9 _ . - (schema
// 2025-11-25 Tool.name; conformance tools-name-format).
func validToolName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func (ts *toolSet) get(name string) *tool {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byName[name]
}

// name decodes raw, a valid JSON value, as a tool name. A known tool's
// name is its own string, without a copy: tool names have no character
// JSON escapes (validToolName), so a string that names one is its bytes
// between the quotes. Any other string is decoded as jsonrpc.String does.
func (ts *toolSet) name(raw json.RawMessage) (string, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		ts.mu.RLock()
		t := ts.byName[string(raw[1:n-1])]
		ts.mu.RUnlock()
		if t != nil {
			return t.name, true
		}
	}
	return jsonrpc.String(raw)
}

// SetDescription replaces the description of the tool called name (what
// only the running server learns later: the tools of code mode's
// upstreams); the tools/list answers that follow carry it, and a modern
// client re-lists within the list's ttlMs. It fails for an unknown name
// or an empty description.
func (s *Server) SetDescription(name, description string) error {
	if description == "" {
		return fmt.Errorf("frontend: tool %q: an empty description", name)
	}
	ts := s.tools
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byName[name]
	if t == nil {
		return fmt.Errorf("frontend: no tool %q", name)
	}
	def := make(map[string]any, len(t.def))
	for k, v := range t.def {
		def[k] = v
	}
	def["description"] = description
	t.def = def
	ts.changed()
	return nil
}

// SetDescriber makes the description of the tool called name depend on
// the caller's principal: tools/list gives each principal describe's
// answer for it (asked once per principal until the next change of the
// list: SetDescription or SetDescriber), and the modern list's cacheScope
// is then "private". A nil describe gives everyone the tool's own
// description again. It fails for an unknown name.
func (s *Server) SetDescriber(name string, describe func(principal string) string) error {
	ts := s.tools
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byName[name]
	if t == nil {
		return fmt.Errorf("frontend: no tool %q", name)
	}
	switch {
	case t.describe == nil && describe != nil:
		ts.described++
	case t.describe != nil && describe == nil:
		ts.described--
	}
	t.describe = describe
	ts.changed()
	return nil
}
