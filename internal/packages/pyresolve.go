package packages

import (
	"context"
	"sort"
	"strings"
)

// PythonEnv is a workspace's Python packages as the interpreter uses
// them.
type PythonEnv struct {
	// Paths are the directories to add to sys.path, in this order,
	// slash-separated and relative to Service.CacheDir: one per wheel.
	Paths    []string        `json:"paths"`
	Packages []PythonPackage `json:"packages"`
}

// PythonPackage is one installed wheel.
type PythonPackage struct {
	Name    string `json:"name"` // normalized
	Version string `json:"version"`
	Wheel   string `json:"wheel"`
	Dir     string `json:"dir"` // relative to Service.CacheDir, as in Paths
	// Bytes are its unpacked files in the cache (0 when not known).
	Bytes int64 `json:"bytes,omitempty"`
}

// sandboxPython is the interpreter's version, for Requires-Python.
var sandboxPython, _ = parsePyVersion("3.11.2")

// maxRounds bounds the resolver's restarts: each adds a requirement it
// learnt, so real trees need one or two.
const maxRounds = 50

// constraint is a requirement and who made it.
type constraint struct {
	req  *requirement
	from string // "the workspace" or "name version"
}

func (c *constraint) String() string {
	return c.req.name + c.req.spec.String() + " (required by " + c.from + ")"
}

// pyPick is a project's chosen wheel.
type pyPick struct {
	name   string
	v      pyVersion
	file   indexFile
	addr   string
	meta   entryMeta
	reqs   []*requirement
	extras map[string]bool
	deps   map[string]bool
}

// pyJob is one resolution: the index pages it read, the wheels it
// unpacked, what it learnt of each project's constraints, and the
// versions the old lock pins, which it prefers.
type pyJob struct {
	s      *Service
	ctx    context.Context
	pages  map[string][]indexFile
	picks  map[string]*pyPick // by cache address: a wheel read once
	locked map[string]PythonLocked
	known  map[string][]*constraint
	seen   map[string]bool // constraint text and origin, once
}

func (s *Service) newPyJob(ctx context.Context, old *PythonLock) *pyJob {
	j := &pyJob{s: s, ctx: ctx, pages: map[string][]indexFile{}, picks: map[string]*pyPick{},
		locked: map[string]PythonLocked{}, known: map[string][]*constraint{}, seen: map[string]bool{}}
	if old != nil {
		j.locked = old.Packages
	}
	return j
}

// resolve installs one version of every project roots need. A
// requirement that the version already chosen does not satisfy restarts
// the resolution knowing it, so that the next round chooses with it in
// mind; a project whose requirements no version satisfies together is a
// conflict that names two of them.
func (j *pyJob) resolve(roots []*requirement) (map[string]*pyPick, error) {
	for round := 0; round < maxRounds; round++ {
		chosen, restart, err := j.round(roots)
		if err != nil || !restart {
			return chosen, err
		}
	}
	return nil, errorf(CodeConflict, "", "the Python requirements could not be resolved in %d rounds", maxRounds)
}

func (j *pyJob) learn(c *constraint) {
	key := c.req.text + "\x00" + c.from
	if !j.seen[key] {
		j.seen[key] = true
		j.known[c.req.name] = append(j.known[c.req.name], c)
	}
}

func (j *pyJob) round(roots []*requirement) (map[string]*pyPick, bool, error) {
	chosen := map[string]*pyPick{}
	var queue []*constraint
	for _, r := range roots {
		queue = append(queue, &constraint{req: r, from: "the workspace"})
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		j.learn(c)
		if p := chosen[c.req.name]; p != nil {
			if !c.req.spec.contains(p.v) {
				return nil, true, nil
			}
			added := false
			for _, e := range c.req.extras {
				if !p.extras[e] {
					p.extras[e], added = true, true
				}
			}
			if added {
				queue = append(queue, p.dependencies()...)
			}
			continue
		}
		p, err := j.pick(c.req.name)
		if err != nil {
			return nil, false, err
		}
		p.extras = map[string]bool{}
		for _, e := range c.req.extras {
			p.extras[e] = true
		}
		chosen[p.name] = p
		queue = append(queue, p.dependencies()...)
	}
	for _, p := range chosen {
		p.deps = map[string]bool{}
		for _, c := range p.dependencies() {
			p.deps[c.req.name] = true
		}
	}
	return chosen, false, nil
}

// dependencies are p's Requires-Dist that apply in the sandbox with its
// extras.
func (p *pyPick) dependencies() []*constraint {
	extras := make([]string, 0, len(p.extras))
	for e := range p.extras {
		extras = append(extras, e)
	}
	sort.Strings(extras)
	from := p.name + " " + p.v.String()
	var out []*constraint
	for _, r := range p.reqs {
		if r.applies(extras) {
			out = append(out, &constraint{req: r, from: from})
		}
	}
	return out
}

// pick chooses name's wheel under every constraint known for it: the
// version the old lock pins if it satisfies them, else the highest one
// (prereleases only when a constraint names one, or when nothing else
// satisfies), with a pure wheel for Python 3.11 that is not yanked.
func (j *pyJob) pick(name string) (*pyPick, error) {
	cs := j.known[name]
	from := ""
	if len(cs) > 0 && cs[0].from != "the workspace" {
		from = cs[0].from
	}
	if err := j.s.permit("pypi", name, from); err != nil {
		return nil, err
	}
	files, err := j.page(name)
	if err != nil {
		return nil, err
	}
	vs := pureVersions(files)
	if len(vs) == 0 {
		return nil, notPure(name, files)
	}
	excluded := map[string]bool{} // versions whose METADATA refuses Python 3.11
	for {
		best := j.choose(name, vs, cs, excluded)
		if best == nil {
			return nil, j.explain(name, vs, cs, files)
		}
		p, err := j.wheel(name, best.file, "")
		if err != nil {
			return nil, err
		}
		if rp, ok := parseSpecSet(p.meta.RequiresPython); ok && !rp.contains(sandboxPython) {
			excluded[best.v.String()] = true
			continue
		}
		return p, nil
	}
}

// candidate is a version with the wheel that would be installed for it.
type candidate struct {
	v    pyVersion
	file indexFile
}

// pureVersions are the versions with a pure wheel for the sandbox, the
// best wheel of each, highest version first.
func pureVersions(files []indexFile) []candidate {
	best := map[string]candidate{}
	rank := map[string][2]int{}
	for _, f := range files {
		w, ok := parseWheelName(f.filename)
		if !ok || !w.pure() {
			continue
		}
		if f.requiresPython != "" {
			if rp, ok := parseSpecSet(f.requiresPython); ok && !rp.contains(sandboxPython) {
				continue
			}
		}
		key := w.version.String()
		r := [2]int{w.rank(), -w.build}
		if old, ok := rank[key]; !ok || r[0] < old[0] || r[0] == old[0] && (r[1] < old[1] || r[1] == old[1] && f.filename < best[key].file.filename) {
			best[key], rank[key] = candidate{w.version, f}, r
		}
	}
	out := make([]candidate, 0, len(best))
	for _, c := range best {
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool { return comparePy(out[a].v, out[b].v) > 0 })
	return out
}

func (j *pyJob) choose(name string, vs []candidate, cs []*constraint, excluded map[string]bool) *candidate {
	allowPre := false
	for _, c := range cs {
		allowPre = allowPre || c.req.spec.allowsPre()
	}
	ok := func(c candidate, pre bool) bool {
		if excluded[c.v.String()] || c.v.isPre() && !pre {
			return false
		}
		if c.file.yanked && !pinned(cs, c.v) {
			return false
		}
		for _, k := range cs {
			if !k.req.spec.contains(c.v) {
				return false
			}
		}
		return true
	}
	if l, has := j.locked[name]; has {
		for i, c := range vs {
			if c.file.filename == l.Wheel && ok(c, true) {
				return &vs[i]
			}
		}
	}
	for _, pre := range []bool{allowPre, true} {
		for i, c := range vs {
			if ok(c, pre) {
				return &vs[i]
			}
		}
	}
	return nil
}

// pinned: a yanked version is taken only when a requirement pins it
// with == (PEP 592).
func pinned(cs []*constraint, v pyVersion) bool {
	for _, c := range cs {
		for _, sp := range c.req.spec {
			if sp.op == "==" && !sp.wildcard && sp.contains(v) {
				return true
			}
		}
	}
	return false
}

// explain is why no version of name satisfies cs: one requirement that
// nothing satisfies, or two that nothing satisfies together.
func (j *pyJob) explain(name string, vs []candidate, cs []*constraint, files []indexFile) error {
	sat := func(c candidate, ks ...*constraint) bool {
		for _, k := range ks {
			if !k.req.spec.contains(c.v) {
				return false
			}
		}
		return true
	}
	any := func(ks ...*constraint) bool {
		for _, c := range vs {
			if sat(c, ks...) {
				return true
			}
		}
		return false
	}
	for i, c := range cs {
		if !any(c) {
			if v := anyVersionOf(files, c.req.spec); v != "" {
				return errorf(CodeNotPure, name, "%s %s (%s) has no pure-Python wheel (py3-none-any): packages with C extensions, such as numpy and pandas, cannot run in this sandbox", name, v, c)
			}
			return errorf(CodeNotFound, name, "no version of %s with a pure-Python wheel satisfies %s; the index has %s", name, c, versionList(vs))
		}
		for _, d := range cs[:i] {
			if !any(d, c) {
				return errorf(CodeConflict, name, "conflicting requirements: %s and %s, which no version of %s satisfies together", d, c, name)
			}
		}
	}
	return errorf(CodeConflict, name, "conflicting requirements for %s: %s", name, joinConstraints(cs))
}

func joinConstraints(cs []*constraint) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, ", ")
}

func versionList(vs []candidate) string {
	var parts []string
	for i, c := range vs {
		if i == 5 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, c.v.String())
	}
	return strings.Join(parts, ", ")
}

// anyVersionOf is a version that some file of the index (any wheel or
// source distribution) has and spec takes, "" when none.
func anyVersionOf(files []indexFile, spec pySpecSet) string {
	var best *pyVersion
	for _, f := range files {
		var v pyVersion
		var ok bool
		if w, wok := parseWheelName(f.filename); wok {
			v, ok = w.version, true
		} else {
			v, ok = sdistVersion(f.filename)
		}
		if ok && spec.contains(v) && (best == nil || comparePy(v, *best) > 0) {
			vv := v
			best = &vv
		}
	}
	if best == nil {
		return ""
	}
	return best.String()
}

// sdistVersion reads the version of a source distribution's file name
// (name-1.2.3.tar.gz), for messages only.
func sdistVersion(fn string) (pyVersion, bool) {
	for _, ext := range []string{".tar.gz", ".zip", ".tar.bz2"} {
		if base, ok := strings.CutSuffix(fn, ext); ok {
			if i := strings.LastIndexByte(base, '-'); i >= 0 {
				return parsePyVersion(base[i+1:])
			}
		}
	}
	return pyVersion{}, false
}

// notPure is the error for a project without any pure wheel.
func notPure(name string, files []indexFile) error {
	if len(files) == 0 {
		return errorf(CodeNotFound, name, "the index lists no files for %s", name)
	}
	return errorf(CodeNotPure, name, "%s has no pure-Python wheel (py3-none-any) for Python 3.11 on the index, only wheels built for particular platforms or source distributions: packages with C extensions, such as numpy and pandas, cannot run in this sandbox", name)
}
