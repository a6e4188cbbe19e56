package packages

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// NPMSpec is a JavaScript bare specifier as code imports it or a tool
// names it: "dayjs", "zod@^3", "npm:@scope/pkg@1.2/sub/path".
type NPMSpec struct {
	Name string
	// Range is a semver range or a dist-tag; "" when none was given (the
	// registry's latest).
	Range string
	// Subpath is what follows the package in the specifier, "" or
	// "/sub/path": the loader resolves it through the package's exports.
	Subpath string
}

// npmName is a package name the registry accepts, new or old (old ones
// may have capitals): an optional @scope/, then URL-safe characters, at
// most 214 of them, not starting with . or _.
var npmName = regexp.MustCompile(`^(@[a-z0-9~-][a-z0-9._~-]*/)?[A-Za-z0-9~-][A-Za-z0-9._~-]*$`)

func validNPMName(s string) bool { return len(s) <= 214 && npmName.MatchString(s) }

// npmTag is a dist-tag ("latest", "next", "beta").
var npmTag = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)

// ParseNPMSpec reads a specifier: an optional "npm:", the name, an
// optional "@range" or "@tag", an optional subpath.
func ParseNPMSpec(s string) (NPMSpec, error) {
	orig := s
	s = strings.TrimPrefix(s, "npm:")
	bad := func(why string) (NPMSpec, error) {
		return NPMSpec{}, errorf(CodeInvalid, orig, "%q is not an npm package specifier: %s", orig, why)
	}
	if len(s) > maxRangeLen {
		return bad("too long")
	}
	var name, rest string
	if strings.HasPrefix(s, "@") {
		scope, after, ok := strings.Cut(s, "/")
		if !ok {
			return bad("a scoped name is @scope/name")
		}
		n := strings.IndexAny(after, "@/")
		if n < 0 {
			n = len(after)
		}
		name, rest = scope+"/"+after[:n], after[n:]
	} else {
		n := strings.IndexAny(s, "@/")
		if n < 0 {
			n = len(s)
		}
		name, rest = s[:n], s[n:]
	}
	if !validNPMName(name) {
		return bad("not a package name")
	}
	spec := NPMSpec{Name: name}
	if strings.HasPrefix(rest, "@") {
		want := rest[1:]
		if i := strings.Index(want, "/"); i >= 0 {
			want, rest = want[:i], want[i:]
		} else {
			rest = ""
		}
		if _, ok := parseRange(want); !ok && !npmTag.MatchString(want) {
			return bad("not a version, range or dist-tag after @")
		}
		if want == "" {
			return bad("nothing after @")
		}
		spec.Range = want
	}
	if rest != "" {
		if _, ok, err := entryPath(rest[1:]); !ok || err != nil || strings.Contains(rest, "//") {
			return bad("not a subpath")
		}
		spec.Subpath = rest
	}
	return spec, nil
}

// packument is what the registry says of a package, reduced to what
// resolving needs. Versions stay raw until one is picked: old versions of
// real packages hold fields of unexpected types, and one of them must not
// make the others unusable.
type packument struct {
	Name     string                     `json:"name"`
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]json.RawMessage `json:"versions"`
}

// manifest is one version of a package.
type manifest struct {
	Name                 string   `json:"name"`
	Version              string   `json:"version"`
	Dependencies         depMap   `json:"dependencies"`
	OptionalDependencies depMap   `json:"optionalDependencies"`
	PeerDependencies     depMap   `json:"peerDependencies"`
	PeerDependenciesMeta metaMap  `json:"peerDependenciesMeta"`
	Deprecated           anyValue `json:"deprecated"`
	Dist                 struct {
		Tarball      string `json:"tarball"`
		Integrity    string `json:"integrity"`
		Shasum       string `json:"shasum"`
		UnpackedSize int64  `json:"unpackedSize"`
	} `json:"dist"`
}

// depMap is a dependencies object; anything else (an array, as some old
// packages have) reads as none, and values that are not strings are
// dropped.
type depMap map[string]string

func (d *depMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	m := depMap{}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			m[k] = s
		}
	}
	*d = m
	return nil
}

type metaMap map[string]bool // name → optional

func (m *metaMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	out := metaMap{}
	for k, v := range raw {
		var meta struct {
			Optional bool `json:"optional"`
		}
		if json.Unmarshal(v, &meta) == nil {
			out[k] = meta.Optional
		}
	}
	*m = out
	return nil
}

// anyValue is set when the field is there and neither false, null nor "".
type anyValue bool

func (a *anyValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*a = anyValue(!bytes.Equal(b, []byte("false")) && !bytes.Equal(b, []byte("null")) && !bytes.Equal(b, []byte(`""`)))
	return nil
}

// parsePackument reads a registry's answer for name.
func parsePackument(name string, b []byte) (*packument, error) {
	var p packument
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, errorf(CodeRegistry, name, "the registry's answer for %s is not a packument: %v", name, err)
	}
	if p.Versions == nil {
		return nil, errorf(CodeRegistry, name, "the registry's answer for %s is not a packument: it lists no versions", name)
	}
	if p.Name != "" && p.Name != name {
		return nil, errorf(CodeRegistry, name, "the registry answered for %s with the packument of %q", name, p.Name)
	}
	return &p, nil
}

// manifest decodes one version.
func (p *packument) manifest(name, ver string) (*manifest, error) {
	raw, ok := p.Versions[ver]
	if !ok {
		return nil, errorf(CodeNotFound, name, "the registry has no version %s of %s", ver, name)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errorf(CodeRegistry, name, "the registry's entry for %s@%s is not valid: %v", name, ver, err)
	}
	if m.Version == "" {
		m.Version = ver
	}
	if m.Version != ver || (m.Name != "" && m.Name != name) {
		return nil, errorf(CodeRegistry, name, "the registry's entry for %s@%s names %s@%s", name, ver, m.Name, m.Version)
	}
	m.Name = name
	return &m, nil
}

// pick chooses the version for want (a range or a dist-tag), as npm
// does: the "latest" tag when it satisfies the range and is not
// deprecated, else the highest version that satisfies it, versions not
// deprecated first.
func (p *packument) pick(name, want string) (*manifest, error) {
	if want == "" {
		want = "latest"
	}
	r, isRange := parseRange(want)
	if !isRange {
		v, ok := p.DistTags[want]
		if !ok {
			return nil, errorf(CodeNotFound, name, "%s has no dist-tag %q", name, want)
		}
		return p.manifest(name, v)
	}
	type cand struct {
		s string
		v version
	}
	var cands []cand
	for s := range p.Versions {
		if v, ok := parseVersion(s); ok && r.satisfies(v) {
			cands = append(cands, cand{s, v})
		}
	}
	if len(cands) == 0 {
		return nil, errorf(CodeNotFound, name, "no version of %s satisfies %q", name, want)
	}
	sort.Slice(cands, func(i, j int) bool { return compareVersions(cands[i].v, cands[j].v) > 0 })
	if latest, ok := p.DistTags["latest"]; ok {
		if v, ok := parseVersion(latest); ok && r.satisfies(v) {
			if m, err := p.manifest(name, latest); err == nil && !m.Deprecated {
				return m, nil
			}
		}
	}
	var deprecated *manifest
	var firstErr error
	for _, c := range cands {
		m, err := p.manifest(name, c.s)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !m.Deprecated {
			return m, nil
		}
		if deprecated == nil {
			deprecated = m
		}
	}
	if deprecated != nil {
		return deprecated, nil
	}
	return nil, firstErr
}

// registryWant says whether a dependency's value is something the
// registry serves (a range or a tag), and if not, what it is.
func registryWant(name, want, from string) error {
	if _, ok := parseRange(want); ok || npmTag.MatchString(want) {
		return nil
	}
	kind := "not a version range"
	switch {
	case strings.HasPrefix(want, "npm:"):
		kind = "an alias (npm:)"
	case strings.Contains(want, ":") || strings.Contains(want, "/"):
		kind = "not from the registry (git, a URL or a file)"
	}
	return errorf(CodeInvalid, name, "%s asks for %s@%q, which is %s: only registry versions can be installed", from, name, want, kind)
}

// packumentURL is where the registry serves name's packument; a scope's
// slash is escaped, as npm sends it.
func packumentURL(registry, name string) string {
	return strings.TrimSuffix(registry, "/") + "/" + strings.Replace(name, "/", "%2F", 1)
}

// fetchPackument gets name's abbreviated packument (the install form:
// only what resolving needs), once per job.
func (j *npmJob) fetchPackument(name string) (*packument, error) {
	if p, ok := j.packuments[name]; ok {
		return p, nil
	}
	b, _, err := j.s.fetch.getBytes(j.ctx, name, packumentURL(j.s.cfg.NPMRegistry, name),
		"application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8", isJSON)
	if err != nil {
		return nil, err
	}
	p, err := parsePackument(name, b)
	if err != nil {
		return nil, err
	}
	j.packuments[name] = p
	return p, nil
}

func nameOf(path string) string {
	i := strings.LastIndex(path, "node_modules/")
	return path[i+len("node_modules/"):]
}
