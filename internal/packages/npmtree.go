package packages

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
)

// NPMTree is a workspace's npm packages as a loader follows them: the
// package documentation says how.
type NPMTree struct {
	// Root maps each of the workspace's own dependencies to its index in
	// Packages: what a bare import from the workspace's code finds.
	Root     map[string]int `json:"root"`
	Packages []NPMPackage   `json:"packages"`
}

// NPMPackage is one placed package.
type NPMPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Path is its place in the tree, the lock's key ("node_modules/a").
	Path string `json:"path"`
	// Dir holds its files (package.json at its top), slash-separated and
	// relative to Service.CacheDir ("sha512-<hex>/pkg").
	Dir string `json:"dir"`
	// Deps maps each dependency the package may import to its index in
	// Packages, as Node's node_modules lookup would find it.
	Deps map[string]int `json:"deps,omitempty"`
	// Type, Main, Module and Exports are the package.json fields of the
	// same names, as the tarball had them (Exports as written, or absent).
	Type    string          `json:"type,omitempty"`
	Main    string          `json:"main,omitempty"`
	Module  string          `json:"module,omitempty"`
	Exports json.RawMessage `json:"exports,omitempty"`
	// Bytes are its unpacked files in the cache.
	Bytes int64 `json:"bytes,omitempty"`
}

// Bounds of one tree: real ones are a few hundred packages a few levels
// deep; dependency cycles between conflicting versions could nest forever.
const (
	maxTreeNodes = 5000
	maxTreeDepth = 48
)

// node is a package placed in the tree being built; the root is the
// workspace (name "").
type node struct {
	name, version string
	parent        *node
	children      map[string]*node
	edges         map[string]*node
	deps          map[string]string // dependencies and required peers
	optional      map[string]string
	integrity     string // the lock's or the registry's
	shasum        string // when the registry gives no integrity
	tarball       string
	declared      int64
	depth         int
	path          string
	meta          entryMeta
	fromLock      bool // integrity and deps from the lock; tarball not to be trusted
}

// key is the node's cache address when it is known, for adding sizes up
// once per entry.
func (n *node) key() string {
	if d, ok := parseIntegrity(n.integrity); ok && d.algo == "sha512" {
		return d.address()
	}
	return n.name + "@" + n.version
}

func (n *node) lockEntry() NPMLocked {
	return NPMLocked{Version: n.version, Resolved: n.tarball, Integrity: n.integrity,
		Dependencies: nilIfEmpty(n.deps), OptionalDependencies: nilIfEmpty(n.optional)}
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// npmJob is one resolution: the packuments it fetched and the versions
// the old lock pins, which it prefers.
type npmJob struct {
	s          *Service
	ctx        context.Context
	mu         sync.Mutex // packuments, while the tarballs are fetched at once
	packuments map[string]*packument
	locked     map[string][]*node // name → the old lock's entries, highest version first
	nodes      []*node
}

func (s *Service) newNPMJob(ctx context.Context, old *NPMLock) *npmJob {
	j := &npmJob{s: s, ctx: ctx, packuments: map[string]*packument{}, locked: map[string][]*node{}}
	if old != nil {
		for p, e := range old.Packages {
			n := &node{name: nameOf(p), version: e.Version, deps: e.Dependencies, optional: e.OptionalDependencies,
				integrity: e.Integrity, tarball: e.Resolved, fromLock: true}
			j.locked[n.name] = append(j.locked[n.name], n)
		}
		for _, ns := range j.locked {
			sort.Slice(ns, func(a, b int) bool {
				va, _ := parseVersion(ns[a].version)
				vb, _ := parseVersion(ns[b].version)
				return compareVersions(va, vb) > 0
			})
		}
	}
	return j
}

// visible is what Node finds for name from n: n's node_modules, then its
// parent's, up to the root's.
func visible(n *node, name string) *node {
	for ; n != nil; n = n.parent {
		if c := n.children[name]; c != nil {
			return c
		}
	}
	return nil
}

func satisfiesWant(n *node, want string) bool {
	r, ok := parseRange(want)
	if !ok {
		return true // a dist-tag: whatever is there, as npm keeps it
	}
	v, ok := parseVersion(n.version)
	return ok && r.satisfies(v)
}

// resolve picks name's version for want: a version the old lock pins when
// one satisfies want, else the registry's choice.
func (j *npmJob) resolve(name, want, from string) (*node, error) {
	if err := registryWant(name, want, from); err != nil {
		return nil, err
	}
	if err := j.s.permit("npm", name, from); err != nil {
		return nil, err
	}
	for _, l := range j.locked[name] {
		if satisfiesWant(l, want) {
			c := *l
			return &c, nil
		}
	}
	p, err := j.fetchPackument(name)
	if err != nil {
		return nil, err
	}
	m, err := p.pick(name, want)
	if err != nil {
		return nil, err
	}
	n := &node{name: name, version: m.Version, deps: map[string]string{}, optional: map[string]string{},
		integrity: m.Dist.Integrity, shasum: m.Dist.Shasum, tarball: m.Dist.Tarball, declared: m.Dist.UnpackedSize}
	for k, v := range m.Dependencies {
		n.deps[k] = v
	}
	for k, v := range m.PeerDependencies {
		if _, isDep := n.deps[k]; !isDep && !m.PeerDependenciesMeta[k] {
			n.deps[k] = v
		}
	}
	for k, v := range m.OptionalDependencies {
		delete(n.deps, k) // npm: an optional dependency overrides a plain one
		n.optional[k] = v
	}
	return n, nil
}

// build places requires and everything they need, breadth first and in
// name order, each package as close to the root as it can go without
// changing what any placed package already finds: npm's hoisting.
func (j *npmJob) build(requires map[string]string) (*node, error) {
	root := &node{children: map[string]*node{}, edges: map[string]*node{}, deps: requires}
	queue := []*node{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, name := range sortedKeys(p.deps, p.optional) {
			want, optional := p.deps[name], false
			if w, ok := p.optional[name]; ok {
				want, optional = w, true
			}
			if v := visible(p, name); v != nil && satisfiesWant(v, want) {
				p.edges[name] = v
				continue
			}
			from := "the workspace"
			if p.parent != nil {
				from = p.name + "@" + p.version
			}
			n, err := j.resolve(name, want, from)
			if err != nil {
				if optional && j.ctx.Err() == nil {
					continue // as npm: an optional dependency that fails is left out
				}
				return nil, err
			}
			t := j.place(p, name)
			n.parent, n.depth = t, t.depth+1
			n.children, n.edges = map[string]*node{}, map[string]*node{}
			t.children[name] = n
			p.edges[name] = n
			j.nodes = append(j.nodes, n)
			if len(j.nodes) > maxTreeNodes || n.depth > maxTreeDepth {
				return nil, errorf(CodeInvalid, name, "the dependency tree is too large (over %d packages or %d levels deep) at %s@%s", maxTreeNodes, maxTreeDepth, name, n.version)
			}
			queue = append(queue, n)
		}
	}
	return root, nil
}

// place is the highest directory on p's way to the root where name can
// go: nothing of that name there or between it and p (else p would not
// find it), and no package under it already finding a name placed above
// it (which the new one would hide).
func (j *npmJob) place(p *node, name string) *node {
	var chain []*node
	for n := p; n != nil; n = n.parent {
		chain = append(chain, n)
	}
	for i := len(chain) - 1; i > 0; i-- {
		t := chain[i]
		ok := t.children[name] == nil
		for k := 0; ok && k < i; k++ {
			ok = chain[k].children[name] == nil
		}
		if ok && !j.hides(t, name) {
			return t
		}
	}
	return p
}

// hides says whether a package name placed under t would hide, from a
// package under t, the one of that name it found above t.
func (j *npmJob) hides(t *node, name string) bool {
	for _, n := range append(j.nodes, t) {
		e := n.edges[name]
		if e != nil && under(n, t) && !under(e.parent, t) {
			return true
		}
	}
	return false
}

// under says whether n is t or below it.
func under(n, t *node) bool {
	for ; n != nil; n = n.parent {
		if n == t {
			return true
		}
	}
	return false
}

func sortedKeys(ms ...map[string]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// assignPaths names every node by its place, "node_modules/a/node_modules/b".
func assignPaths(n *node) {
	for _, name := range sortedChildren(n) {
		c := n.children[name]
		c.path = strings.TrimPrefix(n.path+"/node_modules/"+name, "/")
		assignPaths(c)
	}
}

func sortedChildren(n *node) []string {
	keys := make([]string, 0, len(n.children))
	for k := range n.children {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fromLock rebuilds the tree a lock describes, as it is: each package at
// its path, each dependency what Node would find from there.
func fromLock(l *NPMLock) (*node, []*node, error) {
	root := &node{children: map[string]*node{}, edges: map[string]*node{}, deps: l.Requires}
	paths := make([]string, 0, len(l.Packages))
	for p := range l.Packages {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(a, b int) bool {
		return len(paths[a]) < len(paths[b]) || len(paths[a]) == len(paths[b]) && paths[a] < paths[b]
	})
	byPath := map[string]*node{"": root}
	var nodes []*node
	for _, p := range paths {
		e := l.Packages[p]
		name := nameOf(p)
		parentPath := strings.TrimSuffix(strings.TrimSuffix(p, name), "/node_modules/")
		if parentPath == "node_modules/" || parentPath == "node_modules" {
			parentPath = ""
		}
		parent := byPath[parentPath]
		if parent == nil {
			return nil, nil, errorf(CodeInvalid, name, "the packages lock is not valid: %s has no parent package in it", p)
		}
		n := &node{name: name, version: e.Version, parent: parent, children: map[string]*node{}, edges: map[string]*node{},
			deps: e.Dependencies, optional: e.OptionalDependencies, integrity: e.Integrity, tarball: e.Resolved,
			depth: parent.depth + 1, path: p, fromLock: true}
		parent.children[name] = n
		byPath[p] = n
		nodes = append(nodes, n)
	}
	for _, n := range append([]*node{root}, nodes...) {
		for _, name := range sortedKeys(n.deps, n.optional) {
			want, optional := n.deps[name], false
			if w, ok := n.optional[name]; ok {
				want, optional = w, true
			}
			v := visible(n, name)
			if v == nil && optional {
				continue
			}
			if v == nil || !satisfiesWant(v, want) {
				return nil, nil, errorf(CodeInvalid, name, "the packages lock is not valid: %s needs %s@%s, which it does not hold", orWorkspace(n), name, want)
			}
			n.edges[name] = v
		}
	}
	return root, nodes, nil
}

func orWorkspace(n *node) string {
	if n.parent == nil {
		return "the workspace"
	}
	return n.path
}

// tree is the loader's view of placed nodes, each with its cache entry.
func tree(root *node, nodes []*node) *NPMTree {
	sorted := append([]*node(nil), nodes...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].path < sorted[b].path })
	index := map[*node]int{}
	for i, n := range sorted {
		index[n] = i
	}
	deps := func(n *node) map[string]int {
		if len(n.edges) == 0 {
			return nil
		}
		m := make(map[string]int, len(n.edges))
		for name, e := range n.edges {
			m[name] = index[e]
		}
		return m
	}
	t := &NPMTree{Root: deps(root), Packages: make([]NPMPackage, len(sorted))}
	if t.Root == nil {
		t.Root = map[string]int{}
	}
	for i, n := range sorted {
		d, _ := parseIntegrity(n.integrity)
		t.Packages[i] = NPMPackage{Name: n.name, Version: n.version, Path: n.path, Dir: pkgDir(d.address()),
			Deps: deps(n), Type: n.meta.Type, Main: n.meta.Main, Module: n.meta.Module, Exports: n.meta.Exports, Bytes: n.meta.Bytes}
	}
	return t
}
