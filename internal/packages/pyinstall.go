package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// AddPython resolves reqs (PEP 508 requirements) together with what lock
// already requires, fetches and unpacks whatever the cache lacks, and
// returns the new lock and the directories for sys.path. Versions the
// lock pins are kept when they satisfy; a requirement for a project the
// workspace already requires replaces it. lock may be nil; it is not
// changed. On error nothing the workspace sees changes; the cache may
// have gained complete entries.
func (s *Service) AddPython(ctx context.Context, lock *Lock, reqs ...string) (*Lock, *PythonEnv, error) {
	if !s.cfg.Python {
		return nil, nil, errorf(CodeOff, "", "Python packages are off (packages.python)")
	}
	var old *PythonLock
	if lock != nil {
		old = lock.Python
	}
	var texts []string
	byName := map[string]int{}
	add := func(t string) error {
		r, err := parseRequirement(t)
		if err != nil {
			return err
		}
		if i, ok := byName[r.name]; ok {
			texts[i] = r.text
			return nil
		}
		byName[r.name] = len(texts)
		texts = append(texts, r.text)
		return nil
	}
	if old != nil {
		for _, t := range old.Requires {
			if err := add(t); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, t := range reqs {
		if err := add(t); err != nil {
			return nil, nil, err
		}
	}
	var roots []*requirement
	for _, t := range texts {
		r, _ := parseRequirement(t)
		if r.applies(nil) {
			roots = append(roots, r)
		}
	}
	j := s.newPyJob(ctx, old)
	chosen, err := j.resolve(roots)
	if err != nil {
		return nil, nil, err
	}
	bytes := s.otherBytes(lock, "pypi")
	for _, p := range chosen {
		bytes[p.addr] = p.meta.Bytes
	}
	if err := s.checkTotal(bytes); err != nil {
		return nil, nil, err
	}
	pl := &PythonLock{Requires: texts, Packages: map[string]PythonLocked{}}
	for name, p := range chosen {
		e := PythonLocked{Version: p.v.String(), Wheel: p.file.filename, SHA256: strings.TrimPrefix(p.addr, "sha256-")}
		for d := range p.deps {
			e.Dependencies = append(e.Dependencies, d)
		}
		sort.Strings(e.Dependencies)
		pl.Packages[name] = e
	}
	out := &Lock{LockfileVersion: LockfileVersion, Python: pl}
	if lock != nil {
		c := *lock
		c.Python = pl
		out = &c
	}
	return out, s.sized(pythonEnv(pl)), nil
}

// Python returns the directories lock describes, fetching only what the
// cache lacks and resolving nothing. A nil lock, or one without Python
// packages, is an empty environment.
func (s *Service) Python(ctx context.Context, lock *Lock) (*PythonEnv, error) {
	if lock == nil || lock.Python == nil || len(lock.Python.Packages) == 0 {
		return &PythonEnv{Paths: []string{}, Packages: []PythonPackage{}}, nil
	}
	if !s.cfg.Python {
		return nil, errorf(CodeOff, "", "Python packages are off (packages.python)")
	}
	j := s.newPyJob(ctx, nil)
	bytes := s.otherBytes(lock, "pypi")
	for _, name := range sortedNames(lock.Python.Packages) {
		e := lock.Python.Packages[name]
		if err := s.permit("pypi", name, ""); err != nil {
			return nil, err
		}
		addr := "sha256-" + e.SHA256
		m, ok := s.store.lookup(addr)
		if !ok {
			files, err := j.page(name)
			if err != nil {
				return nil, err
			}
			var f *indexFile
			for i := range files {
				if files[i].filename == e.Wheel {
					f = &files[i]
				}
			}
			if f == nil {
				return nil, errorf(CodeNotFound, name, "the index no longer lists %s, which the lock pins", e.Wheel)
			}
			p, err := j.wheel(name, *f, e.SHA256)
			if err != nil {
				return nil, err
			}
			m = p.meta
		}
		if m.Ecosystem != "pypi" || m.Wheel != e.Wheel {
			return nil, errorf(CodeIntegrity, name, "the lock's sha256 for %s is that of %s", e.Wheel, m.Wheel)
		}
		bytes[addr] = m.Bytes
	}
	if err := s.checkTotal(bytes); err != nil {
		return nil, err
	}
	return s.sized(pythonEnv(lock.Python)), nil
}

func sortedNames(m map[string]PythonLocked) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func pythonEnv(pl *PythonLock) *PythonEnv {
	env := &PythonEnv{Paths: []string{}, Packages: []PythonPackage{}}
	for _, name := range sortedNames(pl.Packages) {
		e := pl.Packages[name]
		dir := pkgDir("sha256-" + e.SHA256)
		env.Paths = append(env.Paths, dir)
		env.Packages = append(env.Packages, PythonPackage{Name: name, Version: e.Version, Wheel: e.Wheel, Dir: dir})
	}
	return env
}

// sized fills in each package's Bytes from the cache's meta.json.
func (s *Service) sized(env *PythonEnv) *PythonEnv {
	for i := range env.Packages {
		if m, ok := s.store.lookup(strings.TrimSuffix(env.Packages[i].Dir, "/pkg")); ok {
			env.Packages[i].Bytes = m.Bytes
		}
	}
	return env
}

// page reads name's project page from the index, once per job.
func (j *pyJob) page(name string) ([]indexFile, error) {
	if f, ok := j.pages[name]; ok {
		return f, nil
	}
	u := strings.TrimSuffix(j.s.cfg.PythonIndex, "/") + "/" + name + "/"
	b, mt, err := j.s.fetch.getBytes(j.ctx, name, u,
		simpleJSON+", "+simpleHTML+";q=0.2, text/html;q=0.01", isSimpleType)
	if err != nil {
		return nil, err
	}
	files, err := parseIndexPage(name, u, mt, b)
	if err != nil {
		return nil, err
	}
	j.pages[name] = files
	return files, nil
}

// wheel makes sure f is unpacked in the cache and reads its METADATA.
// The download's sha256 must be the index's when it gives one, and
// lockSHA when the lock pins one; a file the index lists without a hash
// is known afterwards by its own.
func (j *pyJob) wheel(name string, f indexFile, lockSHA string) (*pyPick, error) {
	w, ok := parseWheelName(f.filename)
	if !ok || w.name != name {
		return nil, errorf(CodeRegistry, name, "the index lists %q for %s, which is not a wheel of it", f.filename, name)
	}
	if lockSHA != "" && f.sha256 != "" && f.sha256 != lockSHA {
		return nil, errorf(CodeIntegrity, name, "the lock pins %s with sha256 %s, but the index now gives %s", f.filename, lockSHA, f.sha256)
	}
	want := f.sha256
	if want == "" {
		want = lockSHA
	}
	if want != "" {
		if p := j.picks["sha256-"+want]; p != nil {
			return p, nil
		}
	}
	var m entryMeta
	addr := "sha256-" + want
	cached, ok := entryMeta{}, false
	if want != "" {
		cached, ok = j.s.store.lookup(addr)
	}
	if ok {
		m = cached
	} else {
		file, err := j.s.fetch.getFile(j.ctx, f.filename, f.url, filepath.Join(j.s.store.root, ".tmp"))
		if err != nil {
			return nil, err
		}
		defer os.Remove(file.Name())
		defer file.Close()
		h := sha256.New()
		size, err := io.Copy(h, file)
		if err != nil {
			return nil, err
		}
		got := hex.EncodeToString(h.Sum(nil))
		if want != "" && got != want {
			return nil, errorf(CodeIntegrity, name, "%s does not match its sha256 %s (got %s)", f.filename, want, got)
		}
		addr = "sha256-" + got
		m, err = j.s.store.ensure(addr, func(dir string) (entryMeta, error) {
			return unpackWheel(file, size, filepath.Join(dir, "pkg"), f.filename, w, j.s.cfg.MaxPackageBytes)
		})
		if err != nil {
			return nil, err
		}
	}
	if m.Ecosystem != "pypi" || m.Wheel != f.filename {
		return nil, errorf(CodeIntegrity, name, "the cache entry %s is not %s", addr, f.filename)
	}
	p := &pyPick{name: name, v: w.version, file: f, addr: addr, meta: m}
	for _, rd := range m.Requires {
		r, err := parseRequirement(rd)
		if err != nil {
			return nil, errorf(CodeRegistry, name, "%s's METADATA has a Requires-Dist that is not valid: %v", f.filename, err)
		}
		p.reqs = append(p.reqs, r)
	}
	j.picks[addr] = p
	return p, nil
}

// unpackWheel unzips a wheel into dir, its .data/purelib and platlib at
// the top as an installer puts them (its scripts, headers and data are
// left out), and reads its .dist-info.
func unpackWheel(f *os.File, size int64, dir, filename string, w wheelName, max int64) (entryMeta, error) {
	rename := func(rel string) string {
		top, rest, _ := strings.Cut(rel, "/")
		if !strings.HasSuffix(top, ".data") {
			return rel
		}
		kind, rest, _ := strings.Cut(rest, "/")
		if (kind == "purelib" || kind == "platlib") && rest != "" {
			return rest
		}
		return ""
	}
	x, err := unzip(f, size, dir, filename, max, rename)
	if err != nil {
		return entryMeta{}, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return entryMeta{}, err
	}
	var info string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".dist-info"); ok && e.IsDir() {
			dn, _, _ := strings.Cut(n, "-")
			if normalizePyName(dn) == w.name {
				if info != "" {
					return entryMeta{}, errorf(CodeRegistry, filename, "%s has more than one .dist-info", filename)
				}
				info = e.Name()
			}
		}
	}
	if info == "" {
		return entryMeta{}, errorf(CodeRegistry, filename, "%s has no .dist-info of %s: it is not a wheel", filename, w.name)
	}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, info, name))
		if err != nil {
			return nil, errorf(CodeRegistry, filename, "%s has no %s: it is not a wheel", filename, path.Join(info, name))
		}
		return b, nil
	}
	wb, err := read("WHEEL")
	if err != nil {
		return entryMeta{}, err
	}
	if !wheelVersionOK(wb) {
		return entryMeta{}, errorf(CodeRegistry, filename, "%s is not a version 1 wheel (its WHEEL says no Wheel-Version: 1.x)", filename)
	}
	mb, err := read("METADATA")
	if err != nil {
		return entryMeta{}, err
	}
	md, ok := parseMetadata(mb)
	if !ok {
		return entryMeta{}, errorf(CodeRegistry, filename, "%s's METADATA cannot be read", filename)
	}
	mv, ok := parsePyVersion(md.version)
	if normalizePyName(md.name) != w.name || !ok || comparePy(mv, w.version) != 0 {
		return entryMeta{}, errorf(CodeRegistry, filename, "%s's METADATA is for %s %s", filename, md.name, md.version)
	}
	return entryMeta{Ecosystem: "pypi", Name: w.name, Version: w.version.String(), Bytes: x.bytes, Files: x.files,
		Wheel: filename, Requires: md.requiresDist, RequiresPython: md.requiresPython}, nil
}
