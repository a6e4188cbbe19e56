package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Signatures are the tools principal may call as compact typed
// signatures, one a line, for execute_code's description: TypeScript-like
// for "javascript" (tools.gh.create_issue({title: string, body?: string})),
// Python-like for "python" (tools.gh.create_issue(title: str, body: str |
// None = None)). They fill at most budget bytes (0: code_mode's
// description_budget); the tools beyond it are named only, with a line
// saying tools.list() gives their signatures. Only lists already made are
// read (Tools, Prepare or a call make them): an upstream not listed yet is
// named as such.
func (h *Hub) Signatures(principal, language string, budget int) string {
	if budget <= 0 {
		budget = h.budget
	}
	py := language == "python"
	comment := "//"
	if py {
		comment = "#"
	}
	var items []sigItem
	var notYet []string
	for _, s := range h.servers {
		if !s.usableBy(principal) {
			continue
		}
		l := s.cached()
		if l == nil {
			notYet = append(notYet, "tools."+s.cfg.Name)
			continue
		}
		for _, ti := range l.infos(s) {
			items = append(items, sigItem{server: ti.Server, ident: ti.Ident, line: signatureLine(ti, py, comment)})
		}
	}
	var tail []string
	if len(notYet) > 0 {
		tail = append(tail, fmt.Sprintf("%s %s: not connected yet; tools.list() lists their tools", comment, strings.Join(notYet, ", ")))
	}
	return fit(items, tail, comment, budget)
}

type sigItem struct{ server, ident, line string }

// fit joins the lines of the first k items and the names of the others,
// with k as large as budget allows.
func fit(items []sigItem, tail []string, comment string, budget int) string {
	join := func(k int) string {
		var b strings.Builder
		for _, it := range items[:k] {
			b.WriteString(it.line)
			b.WriteByte('\n')
		}
		if k < len(items) {
			b.WriteString(namesOnly(items[k:], comment))
		}
		for _, t := range tail {
			b.WriteString(t)
			b.WriteByte('\n')
		}
		return b.String()
	}
	// The length of join(k) need not grow with k (a full line may be
	// shorter than the note it saves), so every k is looked at from the
	// largest down; lines are short and budgets small.
	for k := len(items); k >= 0; k-- {
		if out := join(k); len(out) <= budget {
			return out
		}
	}
	return clipLines(join(0), budget, comment)
}

// namesOnly names items by upstream, for those whose signatures did not
// fit.
func namesOnly(items []sigItem, comment string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d more, by name (tools.list() gives their signatures):\n", comment, len(items))
	for i := 0; i < len(items); {
		j := i
		var names []string
		for ; j < len(items) && items[j].server == items[i].server; j++ {
			names = append(names, items[j].ident)
		}
		fmt.Fprintf(&b, "%s tools.%s: %s\n", comment, items[i].server, strings.Join(names, ", "))
		i = j
	}
	return b.String()
}

// clipLines cuts text to budget bytes at a line's end, saying so.
func clipLines(text string, budget int, comment string) string {
	note := comment + " … (tools.list() lists the rest)\n"
	if budget <= len(note) {
		return ""
	}
	cut := text[:budget-len(note)]
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 {
		cut = cut[:i+1]
	} else {
		cut = ""
	}
	return cut + note
}

// signatureLine is one tool's line.
func signatureLine(ti ToolInfo, py bool, comment string) string {
	in := decodeSchema(ti.InputSchema)
	var b strings.Builder
	b.WriteString("tools." + ti.Server + "." + ti.Ident)
	if py {
		b.WriteString("(" + pyParams(in) + ")")
		if out := decodeSchema(ti.OutputSchema); out != nil {
			b.WriteString(" -> " + typeOf(out, true, 0))
		}
	} else {
		b.WriteString("(" + jsParams(in) + ")")
		if out := decodeSchema(ti.OutputSchema); out != nil {
			b.WriteString(": " + typeOf(out, false, 0))
		}
	}
	note := firstSentence(ti.Description, 100)
	if ti.Access == AccessAsk {
		note = strings.TrimSpace(note + " (asks the person first)")
	}
	if note != "" {
		b.WriteString("  " + comment + " " + note)
	}
	return b.String()
}

func decodeSchema(raw json.RawMessage) map[string]any {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// firstSentence is the first line of text up to its first ". ", at most n
// bytes.
func firstSentence(text string, n int) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexAny(text, "\r\n\u2028\u2029"); i >= 0 {
		text = text[:i]
	}
	if i := strings.Index(text, ". "); i >= 0 {
		text = text[:i+1]
	}
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, text)
	return clip(strings.TrimSpace(text), n)
}

// property is one top-level parameter.
type property struct {
	name     string
	schema   any
	required bool
}

func properties(in map[string]any) []property {
	props, _ := in["properties"].(map[string]any)
	req := map[string]bool{}
	if rs, ok := in["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
	}
	out := make([]property, 0, len(props))
	for name, sch := range props {
		out = append(out, property{name: name, schema: sch, required: req[name]})
	}
	// Required first, then by name: the order a Python signature needs,
	// and a stable one (JSON objects have none).
	sort.Slice(out, func(i, j int) bool {
		if out[i].required != out[j].required {
			return out[i].required
		}
		return out[i].name < out[j].name
	})
	return out
}

func jsParams(in map[string]any) string {
	ps := properties(in)
	if len(ps) == 0 {
		return ""
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		opt := ""
		if !p.required {
			opt = "?"
		}
		parts[i] = jsKey(p.name) + opt + ": " + typeOf(p.schema, false, 1)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func pyParams(in map[string]any) string {
	ps := properties(in)
	plain := true
	for _, p := range ps {
		if !identifier(p.name) {
			plain = false
		}
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		t := typeOf(p.schema, true, 1)
		switch {
		case !plain: // not all keyword arguments: the object's shape instead
			opt := ""
			if !p.required {
				opt = "?"
			}
			parts[i] = jsonString(p.name) + opt + ": " + t
		case p.required:
			parts[i] = p.name + ": " + t
		default:
			if d := pyDefault(p.schema); d != "" {
				parts[i] = p.name + ": " + t + " = " + d
			} else {
				parts[i] = p.name + ": " + t + " | None = None"
			}
		}
	}
	if !plain {
		return "**{" + strings.Join(parts, ", ") + "}"
	}
	return strings.Join(parts, ", ")
}

// pyDefault is the schema's default as Python writes it, "" when it has
// none (or one too long to show).
func pyDefault(schema any) string {
	m, _ := schema.(map[string]any)
	switch v := m["default"].(type) {
	case bool:
		if v {
			return "True"
		}
		return "False"
	case float64, string:
		if b, _ := json.Marshal(v); len(b) <= 40 {
			return string(b)
		}
	}
	return ""
}

// maxTypeLen bounds one rendered type: a longer one is written as its
// base type.
const maxTypeLen = 160

// typeOf renders a JSON Schema as a TypeScript-like (py false) or
// Python-like type.
func typeOf(schema any, py bool, depth int) string {
	t := renderType(schema, py, depth)
	if len(t) > maxTypeLen {
		m, _ := schema.(map[string]any)
		t = baseType(m, py)
	}
	return t
}

func renderType(schema any, py bool, depth int) string {
	m, ok := schema.(map[string]any)
	if !ok || depth > 4 {
		return anyType(py)
	}
	if v, ok := m["const"]; ok {
		return literal(v, py)
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 && len(e) <= 8 {
		lits := make([]string, len(e))
		for i, v := range e {
			lits[i] = literal(v, py)
		}
		if py {
			return "Literal[" + strings.Join(lits, ", ") + "]"
		}
		return strings.Join(lits, " | ")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok && len(alts) > 0 && len(alts) <= 6 {
			return union(alts, py, depth)
		}
	}
	switch ts := m["type"].(type) {
	case string:
		return namedType(ts, m, py, depth)
	case []any:
		alts := make([]any, 0, len(ts))
		for _, t := range ts {
			if s, ok := t.(string); ok {
				alts = append(alts, map[string]any{"type": s, "items": m["items"], "properties": m["properties"], "required": m["required"]})
			}
		}
		if len(alts) > 0 {
			return union(alts, py, depth)
		}
	}
	if _, ok := m["properties"]; ok {
		return namedType("object", m, py, depth)
	}
	return anyType(py)
}

func union(alts []any, py bool, depth int) string {
	var parts []string
	seen := map[string]bool{}
	for _, a := range alts {
		t := renderType(a, py, depth)
		if !seen[t] {
			seen[t] = true
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " | ")
}

func namedType(t string, m map[string]any, py bool, depth int) string {
	switch t {
	case "string":
		return pick(py, "str", "string")
	case "integer":
		return pick(py, "int", "number")
	case "number":
		return pick(py, "float", "number")
	case "boolean":
		return pick(py, "bool", "boolean")
	case "null":
		return pick(py, "None", "null")
	case "array":
		item := renderType(m["items"], py, depth+1)
		if py {
			return "list[" + item + "]"
		}
		if strings.Contains(item, " | ") {
			item = "(" + item + ")"
		}
		return item + "[]"
	case "object":
		props, _ := m["properties"].(map[string]any)
		if len(props) == 0 {
			if ap, ok := m["additionalProperties"].(map[string]any); ok {
				v := renderType(ap, py, depth+1)
				return pick(py, "dict[str, "+v+"]", "Record<string, "+v+">")
			}
			return pick(py, "dict", "object")
		}
		parts := []string{}
		for _, p := range properties(m) {
			opt := ""
			if !p.required {
				opt = "?"
			}
			k := jsKey(p.name)
			if py {
				k = jsonString(p.name)
			}
			parts = append(parts, k+opt+": "+renderType(p.schema, py, depth+1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return anyType(py)
}

func baseType(m map[string]any, py bool) string {
	if t, ok := m["type"].(string); ok {
		switch t {
		case "array":
			return pick(py, "list", "any[]")
		case "object":
			return pick(py, "dict", "object")
		}
		return namedType(t, nil, py, 0)
	}
	return anyType(py)
}

func anyType(py bool) string { return pick(py, "Any", "any") }

func pick(py bool, p, js string) string {
	if py {
		return p
	}
	return js
}

func literal(v any, py bool) string {
	switch v := v.(type) {
	case nil:
		return pick(py, "None", "null")
	case bool:
		if py {
			return map[bool]string{true: "True", false: "False"}[v]
		}
		return fmt.Sprint(v)
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return anyType(py)
	}
	return string(b)
}

// jsKey is name as an object literal's key: bare when it is an
// identifier (reserved words included, as JavaScript allows), else quoted.
func jsKey(name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || i > 0 && c >= '0' && c <= '9') {
			return jsonString(name)
		}
	}
	if name == "" {
		return `""`
	}
	return name
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// identifier: letters, digits and _, not starting with a digit, not a
// Python keyword.
func identifier(s string) bool { return s != "" && identOf(s) == s }

// Prepare lists every upstream's tools (starting or connecting to those
// not connected yet), so that Signatures has them all; an upstream that
// cannot be reached is named in the error (one *Error each, joined).
func (h *Hub) Prepare(ctx context.Context) error {
	errs := make([]error, len(h.servers))
	var wg sync.WaitGroup
	for i, s := range h.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.tools(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
