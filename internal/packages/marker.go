package packages

import (
	"errors"
	"sort"
	"strings"
)

// requirement is a PEP 508 dependency specifier without a URL:
// name[extras] specifiers ; marker.
type requirement struct {
	text   string // as written
	name   string // normalized
	extras []string
	spec   pySpecSet
	marker *marker // nil: always
}

// parseRequirement reads "attrs", "attrs>=23,<25", "rich[jupyter] ==13.7.1",
// "foo (>=1.0) ; python_version < '3.12'". A direct URL ("name @ url") is
// refused: packages come from the index only.
func parseRequirement(s string) (*requirement, error) {
	bad := func(why string) (*requirement, error) {
		return nil, errorf(CodeInvalid, s, "%q is not a Python requirement: %s", s, why)
	}
	if len(s) > maxRangeLen {
		return bad("too long")
	}
	r := &requirement{text: strings.TrimSpace(s)}
	rest := r.text
	if i := strings.IndexByte(rest, ';'); i >= 0 {
		m, err := parseMarker(rest[i+1:])
		if err != nil {
			return bad(err.Error())
		}
		r.marker, rest = m, rest[:i]
	}
	rest = strings.TrimSpace(rest)
	n := 0
	for n < len(rest) && (identChar(rest[n], true) || rest[n] == '_') {
		n++
	}
	if !validPyName(rest[:n]) {
		return bad("no project name")
	}
	r.name, rest = normalizePyName(rest[:n]), strings.TrimSpace(rest[n:])
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return bad("an unclosed [")
		}
		for _, e := range strings.Split(rest[1:end], ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			if !validPyName(e) {
				return bad("an extra that is not a name")
			}
			r.extras = append(r.extras, normalizePyName(e))
		}
		sort.Strings(r.extras)
		rest = strings.TrimSpace(rest[end+1:])
	}
	if strings.HasPrefix(rest, "@") {
		return bad("a direct URL; only packages from the index can be installed")
	}
	if strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")") {
		rest = rest[1 : len(rest)-1]
	}
	spec, ok := parseSpecSet(rest)
	if !ok {
		return bad("not a version specifier")
	}
	r.spec = spec
	return r, nil
}

// markerEnv is the environment markers are evaluated in: the sandbox's
// CPython 3.11 on WASI, as sys and platform describe it there.
var markerEnv = map[string]string{
	"python_version":                 "3.11",
	"python_full_version":            "3.11.2",
	"os_name":                        "posix",
	"sys_platform":                   "wasi",
	"platform_system":                "wasi",
	"platform_machine":               "wasm32",
	"platform_release":               "",
	"platform_version":               "",
	"platform_python_implementation": "CPython",
	"implementation_name":            "cpython",
	"implementation_version":         "3.11.2",
}

// legacyMarkers are PEP 345's spellings, still in old METADATA.
var legacyMarkers = map[string]string{
	"os.name": "os_name", "sys.platform": "sys_platform", "platform.version": "platform_version",
	"platform.machine": "platform_machine", "platform.python_implementation": "platform_python_implementation",
	"python_implementation": "platform_python_implementation",
}

// versionMarkers are compared as versions when both sides are ones.
var versionMarkers = map[string]bool{"python_version": true, "python_full_version": true,
	"implementation_version": true, "platform_release": true}

// marker is a parsed PEP 508 marker expression.
type marker struct {
	op          string // "and", "or", or a comparison
	left, right *marker
	lhs, rhs    markerValue
}

type markerValue struct {
	variable string // "" for a literal
	literal  string
}

const maxMarkerDepth = 32

type markerParser struct {
	toks  []string
	i     int
	depth int
}

func parseMarker(s string) (*marker, error) {
	toks, err := markerTokens(s)
	if err != nil {
		return nil, err
	}
	p := &markerParser{toks: toks}
	m, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i != len(toks) {
		return nil, errors.New("a marker with " + quoteShort(toks[p.i]) + " where it should end")
	}
	return m, nil
}

// markerTokens splits a marker into names, quoted strings ('…' kept with
// its quote), operators and parentheses.
func markerTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			toks = append(toks, s[i:i+1])
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, errors.New("an unclosed string in a marker")
			}
			toks = append(toks, s[i:i+j+2])
			i += j + 2
		case strings.IndexByte("<>=!~", c) >= 0:
			j := i
			for j < len(s) && strings.IndexByte("<>=!~", s[j]) >= 0 {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case identChar(c, true) || c == '_':
			j := i
			for j < len(s) && (identChar(s[j], true) || s[j] == '_') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			return nil, errors.New("a marker with " + quoteShort(s[i:i+1]) + " in it")
		}
		if len(toks) > 1000 {
			return nil, errors.New("a marker too long")
		}
	}
	return toks, nil
}

func (p *markerParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *markerParser) or() (*marker, error) {
	return p.binary("or", p.and)
}

func (p *markerParser) and() (*marker, error) {
	return p.binary("and", p.expr)
}

func (p *markerParser) binary(op string, next func() (*marker, error)) (*marker, error) {
	m, err := next()
	if err != nil {
		return nil, err
	}
	for p.peek() == op {
		p.i++
		r, err := next()
		if err != nil {
			return nil, err
		}
		m = &marker{op: op, left: m, right: r}
	}
	return m, nil
}

func (p *markerParser) expr() (*marker, error) {
	if p.peek() == "(" {
		p.depth++
		if p.depth > maxMarkerDepth {
			return nil, errors.New("a marker nested too deep")
		}
		p.i++
		m, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, errors.New("an unclosed ( in a marker")
		}
		p.i++
		p.depth--
		return m, nil
	}
	lhs, err := p.value()
	if err != nil {
		return nil, err
	}
	op := p.peek()
	switch op {
	case "<", "<=", "!=", "==", ">=", ">", "~=", "===", "in":
		p.i++
	case "not":
		p.i++
		if p.peek() != "in" {
			return nil, errors.New("a marker with not but no in")
		}
		p.i++
		op = "not in"
	default:
		return nil, errors.New("a marker without a comparison")
	}
	rhs, err := p.value()
	if err != nil {
		return nil, err
	}
	return &marker{op: op, lhs: lhs, rhs: rhs}, nil
}

func (p *markerParser) value() (markerValue, error) {
	t := p.peek()
	p.i++
	switch {
	case t == "":
		return markerValue{}, errors.New("a marker that ends too soon")
	case t[0] == '\'' || t[0] == '"':
		return markerValue{literal: t[1 : len(t)-1]}, nil
	}
	if l, ok := legacyMarkers[t]; ok {
		t = l
	}
	if _, ok := markerEnv[t]; ok || t == "extra" {
		return markerValue{variable: t}, nil
	}
	return markerValue{}, errors.New("a marker with the unknown variable " + quoteShort(t))
}

// eval evaluates the marker for the sandbox, with extra the one extra
// being considered ("" for none).
func (m *marker) eval(extra string) bool {
	switch m.op {
	case "and":
		return m.left.eval(extra) && m.right.eval(extra)
	case "or":
		return m.left.eval(extra) || m.right.eval(extra)
	}
	get := func(v markerValue) string {
		switch v.variable {
		case "":
			return v.literal
		case "extra":
			return extra
		}
		return markerEnv[v.variable]
	}
	l, r := get(m.lhs), get(m.rhs)
	if m.lhs.variable == "extra" || m.rhs.variable == "extra" {
		l, r = normalizePyName(l), normalizePyName(r)
	}
	switch m.op {
	case "in":
		return strings.Contains(r, l)
	case "not in":
		return !strings.Contains(r, l)
	}
	if versionMarkers[m.lhs.variable] || versionMarkers[m.rhs.variable] {
		if sp, ok := parseSpec(m.op + r); ok {
			if v, ok := parsePyVersion(l); ok {
				return pySpecSet{sp}.contains(v)
			}
		}
	}
	switch m.op {
	case "==", "===":
		return l == r
	case "!=":
		return l != r
	}
	return false // an order between strings that are not versions: never
}

// applies says whether r is a dependency in the sandbox, for a package
// installed with the given extras.
func (r *requirement) applies(extras []string) bool {
	if r.marker == nil {
		return true
	}
	if r.marker.eval("") {
		return true
	}
	for _, e := range extras {
		if r.marker.eval(e) {
			return true
		}
	}
	return false
}
