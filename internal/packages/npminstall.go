package packages

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// AddNPM resolves specs (as ParseNPMSpec reads them) together with what
// lock already holds, fetches and unpacks whatever the cache lacks, and
// returns the new lock and the tree. Versions the lock pins are kept when
// they satisfy; a spec for a package the workspace already requires
// replaces its range. A spec without a range is saved as ^version, as npm
// saves it. lock may be nil; it is not changed. On error nothing the
// workspace sees changes; the cache may have gained complete entries.
func (s *Service) AddNPM(ctx context.Context, lock *Lock, specs ...string) (*Lock, *NPMTree, error) {
	if !s.cfg.NPM {
		return nil, nil, errorf(CodeOff, "", "npm packages are off (packages.npm)")
	}
	var old *NPMLock
	if lock != nil {
		old = lock.NPM
	}
	requires := map[string]string{}
	if old != nil {
		for k, v := range old.Requires {
			requires[k] = v
		}
	}
	var bare []string // names given without a range
	for _, sp := range specs {
		spec, err := ParseNPMSpec(sp)
		if err != nil {
			return nil, nil, err
		}
		if spec.Range == "" {
			if _, ok := requires[spec.Name]; ok {
				continue // already there: keep its range and version
			}
			spec.Range = "latest"
			bare = append(bare, spec.Name)
		}
		requires[spec.Name] = spec.Range
	}
	j := s.newNPMJob(ctx, old)
	root, err := j.build(requires)
	if err != nil {
		return nil, nil, err
	}
	assignPaths(root)
	if err := s.fetchAll(ctx, j, lock); err != nil {
		return nil, nil, err
	}
	for _, name := range bare {
		if n := root.edges[name]; n != nil {
			requires[name] = "^" + n.version
		}
	}
	nl := &NPMLock{Requires: requires, Packages: map[string]NPMLocked{}}
	for _, n := range j.nodes {
		nl.Packages[n.path] = n.lockEntry()
	}
	out := &Lock{LockfileVersion: LockfileVersion, NPM: nl}
	if lock != nil {
		c := *lock
		c.NPM = nl
		out = &c
	}
	return out, tree(root, j.nodes), nil
}

// NPM returns the tree lock describes, fetching only what the cache
// lacks and resolving nothing: a fork, checkpoint or restart gets the same
// versions. A nil lock, or one without npm packages, is an empty tree.
func (s *Service) NPM(ctx context.Context, lock *Lock) (*NPMTree, error) {
	if lock == nil || lock.NPM == nil || len(lock.NPM.Packages) == 0 && len(lock.NPM.Requires) == 0 {
		return &NPMTree{Root: map[string]int{}}, nil
	}
	if !s.cfg.NPM {
		return nil, errorf(CodeOff, "", "npm packages are off (packages.npm)")
	}
	root, nodes, err := fromLock(lock.NPM)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := s.permit("npm", n.name, ""); err != nil {
			return nil, err
		}
	}
	j := s.newNPMJob(ctx, nil)
	j.nodes = nodes
	if err := s.fetchAll(ctx, j, lock); err != nil {
		return nil, err
	}
	return tree(root, nodes), nil
}

// fetchAll makes sure every node is in the cache, a few at a time, and
// that the workspace stays within packages.max_total_bytes: first by the
// sizes the registry declares, then by what was unpacked.
func (s *Service) fetchAll(ctx context.Context, j *npmJob, lock *Lock) error {
	bytes := s.otherBytes(lock, "npm")
	declared := map[string]int64{}
	for k, v := range bytes {
		declared[k] = v
	}
	for _, n := range j.nodes {
		if n.declared > s.cfg.MaxPackageBytes {
			return tooLarge(n.name+"@"+n.version, n.tarball, n.declared, s.cfg.MaxPackageBytes)
		}
		declared[n.key()] = n.declared
	}
	if err := s.checkTotal(declared); err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, 4)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One fetch per package, however many places it has in the tree.
	same := map[string][]*node{}
	var firsts []*node
	var keys []string
	for _, n := range j.nodes {
		k := n.name + "@" + n.version + " " + n.integrity
		if same[k] == nil {
			firsts, keys = append(firsts, n), append(keys, k)
		}
		same[k] = append(same[k], n)
	}
	for _, n := range firsts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			err := s.ensureNPM(ctx, j, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
				cancel()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, n := range firsts {
		for _, o := range same[keys[i]] {
			o.integrity, o.tarball, o.meta = n.integrity, n.tarball, n.meta
		}
	}
	for _, n := range j.nodes {
		bytes[n.key()] = n.meta.Bytes
	}
	return s.checkTotal(bytes)
}

// otherBytes is what the lock's packages of other ecosystems than eco
// take in the cache; an entry the cache lacks counts nothing (it will be
// counted when it is fetched).
func (s *Service) otherBytes(lock *Lock, eco string) map[string]int64 {
	m := map[string]int64{}
	if lock == nil {
		return m
	}
	for _, addr := range lock.addresses(eco) {
		if meta, ok := s.store.lookup(addr); ok {
			m[addr] = meta.Bytes
		}
	}
	return m
}

// addresses are the cache addresses of the lock's packages outside eco.
func (l *Lock) addresses(eco string) []string {
	var out []string
	if eco != "npm" && l.NPM != nil {
		for _, e := range l.NPM.Packages {
			if d, ok := parseIntegrity(e.Integrity); ok {
				out = append(out, d.address())
			}
		}
	}
	if eco != "pypi" && l.Python != nil {
		for _, e := range l.Python.Packages {
			out = append(out, "sha256-"+e.SHA256)
		}
	}
	return out
}

// ensureNPM makes sure n's tarball is unpacked in the cache, and sets
// n.integrity (sha512) and n.meta. A lock's package found in the cache
// needs no registry; one that is not there is fetched from the registry
// (never from the lock's resolved URL), whose integrity must be the
// lock's.
func (s *Service) ensureNPM(ctx context.Context, j *npmJob, n *node) error {
	id := n.name + "@" + n.version
	if d, ok := parseIntegrity(n.integrity); ok && d.algo == "sha512" {
		if m, ok := s.store.lookup(d.address()); ok {
			return checkEntry(n, m)
		}
	}
	if n.fromLock {
		// The lock's resolved URL is the workspace's to write: ask the
		// registry where the tarball is.
		j.mu.Lock()
		p, err := j.fetchPackument(n.name)
		j.mu.Unlock()
		if err != nil {
			return err
		}
		m, err := p.manifest(n.name, n.version)
		if err != nil {
			return err
		}
		if n.integrity != "" && m.Dist.Integrity != n.integrity {
			return errorf(CodeIntegrity, id, "the lock pins %s with integrity %s, but the registry now gives %s", id, n.integrity, m.Dist.Integrity)
		}
		n.integrity, n.shasum, n.tarball, n.declared = m.Dist.Integrity, m.Dist.Shasum, m.Dist.Tarball, m.Dist.UnpackedSize
		n.fromLock = false
	}
	want, hasSRI := parseIntegrity(n.integrity)
	if !hasSRI {
		var ok bool
		if want, ok = parseHexDigest("sha1", n.shasum); !ok {
			return errorf(CodeIntegrity, id, "the registry gives no integrity for %s: it cannot be verified", id)
		}
	}
	if n.tarball == "" {
		return errorf(CodeRegistry, id, "the registry gives no tarball for %s", id)
	}
	if n.declared > s.cfg.MaxPackageBytes {
		return tooLarge(id, n.tarball, n.declared, s.cfg.MaxPackageBytes)
	}
	f, err := s.fetch.getFile(ctx, id, n.tarball, filepath.Join(s.store.root, ".tmp"))
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h512 := sha512.New()
	var w io.Writer = h512
	hw := hash.Hash(h512)
	if want.algo != "sha512" {
		hw = want.hash()
		w = io.MultiWriter(h512, hw)
	}
	if _, err := io.Copy(w, f); err != nil {
		return err
	}
	if got := hw.Sum(nil); !equalBytes(got, want.sum) {
		return errorf(CodeIntegrity, id, "the tarball of %s does not match its integrity %s (got %s)", id, want.sri(), digest{want.algo, got}.sri())
	}
	sum := digest{"sha512", h512.Sum(nil)}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	m, err := s.store.ensure(sum.address(), func(dir string) (entryMeta, error) {
		x, err := untarGz(f, filepath.Join(dir, "pkg"), id, s.cfg.MaxPackageBytes)
		if err != nil {
			return entryMeta{}, err
		}
		m := entryMeta{Ecosystem: "npm", Name: n.name, Version: n.version, Bytes: x.bytes, Files: x.files, Integrity: sum.sri()}
		readPackageJSON(filepath.Join(dir, "pkg", "package.json"), &m)
		return m, nil
	})
	if err != nil {
		return err
	}
	n.integrity = sum.sri()
	return checkEntry(n, m)
}

// checkEntry refuses a cache entry that is not the package the tree
// names (a lock edited to point at another package's files).
func checkEntry(n *node, m entryMeta) error {
	if m.Ecosystem != "npm" || m.Name != n.name || m.Version != n.version {
		return errorf(CodeIntegrity, n.name, "the lock's integrity for %s@%s is that of %s@%s", n.name, n.version, m.Name, m.Version)
	}
	n.meta = m
	return nil
}

// readPackageJSON copies the fields a loader follows; a package without a
// readable package.json simply has none.
func readPackageJSON(path string, m *entryMeta) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var pj struct {
		Type    json.RawMessage `json:"type"`
		Main    json.RawMessage `json:"main"`
		Module  json.RawMessage `json:"module"`
		Exports json.RawMessage `json:"exports"`
	}
	if json.NewDecoder(io.LimitReader(f, 4<<20)).Decode(&pj) != nil {
		return
	}
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	m.Type, m.Main, m.Module = str(pj.Type), str(pj.Main), str(pj.Module)
	if len(pj.Exports) > 0 && string(pj.Exports) != "null" {
		m.Exports = pj.Exports
	}
}

func equalBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}
