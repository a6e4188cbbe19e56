package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/packages"
	"execd/internal/worker"
)

// LockPath is where a workspace's packages lock lives, relative to its
// files (/workspace/.execd/packages.lock.json in the guest). Being a file
// of the workspace, it goes wherever the files go: a fork, a checkpoint, a
// restart keep it (and so the same versions), reset_workspace with files
// drops it. The packages themselves are in the shared cache
// (packages.Service.CacheDir), which every guest mounts read-only at
// worker.PackagesMount.
const LockPath = ".execd/packages.lock.json"

// MaxInstallSpecs is the most packages one install names.
const MaxInstallSpecs = 100

// maxLockRead bounds what is read of a lock (ParseLock refuses more).
const maxLockRead = 16<<20 + 1

// Package is one installed package of a workspace.
type Package struct {
	Language string // "javascript" or "python"
	Name     string
	Version  string
	// Bytes are its unpacked files in the shared cache (0 when unknown).
	Bytes int64
	// Direct: the workspace asked for it (not only a dependency).
	Direct bool
}

// Installed is what InstallPackages did.
type Installed struct {
	Language string
	// Added are the packages this call installed or changed the version
	// of; Packages all of the language's packages now, by name.
	Added    []Package
	Packages []Package
}

// Installer installs packages into a workspace: what install_packages
// needs beside the Executor. *Manager implements it.
type Installer interface {
	InstallPackages(ctx context.Context, principal, id, language string, specs []string) (Installed, error)
}

var _ Installer = (*Manager)(nil)

// InstallPackages resolves specs (npm specifiers for javascript, PEP 508
// requirements for python) with the workspace's lock, fetches what the
// cache lacks and writes the new lock; the workspace is created when it
// does not exist, as a run would. It takes the workspace's turn. Errors:
// PackagesFailed (the *packages.Error as Err: off, denied, not found, no
// pure wheel, conflict, integrity, registry...), UnsupportedLanguage,
// LimitReached (the lock does not fit the disk quota).
func (m *Manager) InstallPackages(ctx context.Context, principal, id, language string, specs []string) (Installed, error) {
	lang, err := m.langs.resolve(language)
	if err != nil {
		return Installed{}, err
	}
	if m.cfg.Packages == nil {
		return Installed{}, &Error{Code: PackagesFailed, Msg: "packages are not available: execd runs without a packages cache"}
	}
	var out Installed
	err = m.turn(ctx, principal, id, false, func(w *ws) error {
		disk, err := m.prepare(w)
		if err != nil {
			return err
		}
		out, err = m.install(ctx, w, disk, lang, specs)
		return err
	})
	return out, err
}

// install is InstallPackages holding w's turn, with w's Disk.
func (m *Manager) install(ctx context.Context, w *ws, disk Disk, lang string, specs []string) (Installed, error) {
	defer m.beginPackages()()
	svc := m.cfg.Packages
	old, _, err := readLock(disk)
	if err != nil {
		return Installed{}, err
	}
	if len(specs) == 0 {
		return Installed{}, &Error{Code: PackagesFailed, Msg: "no packages named"}
	}
	if len(specs) > MaxInstallSpecs {
		return Installed{}, &Error{Code: PackagesFailed, Msg: fmt.Sprintf("at most %d packages are installed at once", MaxInstallSpecs)}
	}
	start := time.Now()
	var lock *packages.Lock
	out := Installed{Language: lang}
	switch lang {
	case "javascript":
		var t *packages.NPMTree
		if lock, t, err = svc.AddNPM(ctx, old, specs...); err == nil {
			out.Packages = npmPackages(lock, t)
		}
	case "python":
		var env *packages.PythonEnv
		if lock, env, err = svc.AddPython(ctx, old, specs...); err == nil {
			out.Packages = pythonPackages(lock, env)
		}
	default:
		return Installed{}, &Error{Code: UnsupportedLanguage, Msg: "packages are installed for javascript (npm) and python (pure wheels), not " + lang}
	}
	if err != nil {
		m.log.Info("packages not installed", zap.String("language", lang), zap.Int("asked", len(specs)),
			zap.Duration("took", time.Since(start)), zap.Error(err))
		return Installed{}, packagesError(err)
	}
	b, err := lock.Marshal()
	if err != nil {
		return Installed{}, &Error{Code: PackagesFailed, Msg: "could not write the packages lock", Err: err}
	}
	m.fitPackages(w, disk, func(fit func(*packages.Lock, int) error) {
		if err = fit(lock, len(b)); err != nil {
			return
		}
		if _, werr := disk.WriteFile(LockPath, b); werr != nil {
			err = fileError(LockPath, werr, "write")
		}
		m.recheckLocked(w, false)
	})
	if err != nil {
		return Installed{}, err
	}
	m.accepted.set(w.dir, viewOp(lang), lockGen(b))
	had := map[string]string{}
	for _, p := range lockedPackages(old, lang) {
		had[p.Name] = p.Version
	}
	for _, p := range out.Packages {
		if v, ok := had[p.Name]; !ok || v != p.Version {
			out.Added = append(out.Added, p)
		}
	}
	m.log.Info("packages installed", zap.String("language", lang), zap.Int("asked", len(specs)),
		zap.Int("added", len(out.Added)), zap.Int("packages", len(out.Packages)), zap.Duration("took", time.Since(start)))
	return out, nil
}

// packagesError is a packages failure as the workspace's error.
func packagesError(err error) error {
	var pe *packages.Error
	if errors.As(err, &pe) {
		return &Error{Code: PackagesFailed, Msg: pe.Message, Err: pe}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &Error{Code: PackagesFailed, Msg: "packages could not be installed: " + err.Error(), Err: err}
}

// readLock reads the workspace's lock and its generation (a hash of its
// bytes; "" when there is none). A lock that does not parse is an error
// that says which file to fix or delete.
func readLock(disk Disk) (*packages.Lock, string, error) {
	_, b, err := disk.ReadFile(LockPath, 0, maxLockRead)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil
		}
		return nil, "", fileError(LockPath, err, "read")
	}
	l, err := packages.ParseLock(b)
	if err != nil {
		return nil, "", &Error{Code: PackagesFailed, Msg: err.Error() + " (/workspace/" + LockPath + "; delete it to start the workspace's packages again)", Err: err}
	}
	return l, lockGen(b), nil
}

// viewOp is the guest's request ("npm" or "python") for lang's packages.
func viewOp(lang string) string {
	if lang == "python" {
		return "python"
	}
	return "npm"
}

// lockGen is the generation of a lock of these bytes.
func lockGen(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// npmPackages lists a tree's packages by name (a name placed twice, in two
// versions, is listed twice).
func npmPackages(l *packages.Lock, t *packages.NPMTree) []Package {
	direct := map[string]bool{}
	if l != nil && l.NPM != nil {
		for n := range l.NPM.Requires {
			direct[n] = true
		}
	}
	seen := map[string]bool{}
	var out []Package
	for _, p := range t.Packages {
		k := p.Name + "@" + p.Version
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, Package{Language: "javascript", Name: p.Name, Version: p.Version, Bytes: p.Bytes,
			Direct: direct[p.Name] && !strings.Contains(strings.TrimPrefix(p.Path, "node_modules/"), "node_modules/")})
	}
	sortPackages(out)
	return out
}

func pythonPackages(l *packages.Lock, env *packages.PythonEnv) []Package {
	direct := map[string]bool{}
	if l != nil && l.Python != nil {
		for _, r := range l.Python.Requires {
			direct[packages.RequirementName(r)] = true
		}
	}
	var out []Package
	for _, p := range env.Packages {
		out = append(out, Package{Language: "python", Name: p.Name, Version: p.Version, Bytes: p.Bytes, Direct: direct[p.Name]})
	}
	sortPackages(out)
	return out
}

func sortPackages(ps []Package) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Name != ps[j].Name {
			return ps[i].Name < ps[j].Name
		}
		return ps[i].Version < ps[j].Version
	})
}

// lockedPackages lists what a lock holds for lang, from the lock alone
// (no sizes): what list_workspaces shows without touching the cache.
func lockedPackages(l *packages.Lock, lang string) []Package {
	if l == nil {
		return nil
	}
	var out []Package
	switch lang {
	case "javascript":
		if l.NPM == nil {
			return nil
		}
		seen := map[string]bool{}
		for place, e := range l.NPM.Packages {
			name := place[strings.LastIndex(place, "node_modules/")+len("node_modules/"):]
			if seen[name+"@"+e.Version] {
				continue
			}
			seen[name+"@"+e.Version] = true
			_, direct := l.NPM.Requires[name]
			out = append(out, Package{Language: lang, Name: name, Version: e.Version,
				Direct: direct && place == "node_modules/"+name})
		}
	case "python":
		if l.Python == nil {
			return nil
		}
		direct := map[string]bool{}
		for _, r := range l.Python.Requires {
			direct[packages.RequirementName(r)] = true
		}
		for name, e := range l.Python.Packages {
			out = append(out, Package{Language: lang, Name: name, Version: e.Version, Direct: direct[name]})
		}
	}
	sortPackages(out)
	return out
}

// lockFilePackages is what list shows of the lock at p: every
// language's packages, or nil. A symlink in the workspace can only point
// within it (guestfs), so reading p stays inside the workspace.
func lockFilePackages(p string) []Package {
	l := readLockFile(p)
	if l == nil {
		return nil
	}
	return append(lockedPackages(l, "javascript"), lockedPackages(l, "python")...)
}

// readLockFile reads the lock at p, a host path, or nil when there is
// none or it does not parse.
func readLockFile(p string) *packages.Lock {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLockRead))
	if err != nil {
		return nil
	}
	l, err := packages.ParseLock(b)
	if err != nil {
		return nil
	}
	return l
}

// pkgRun answers one run's package requests (worker.PackageSource): the
// guest's loader asks for the workspace's tree or environment, and to
// install more. The run holds the workspace's turn, so the lock is the
// run's to read and write.
type pkgRun struct {
	m    *Manager
	w    *ws
	disk Disk
	lang string
}

// pkgRequest is what a guest asks (sandbox/ABI.md, execd.packages).
type pkgRequest struct {
	Op       string   `json:"op"`   // "npm", "python" or "install"
	Have     string   `json:"have"` // the generation the guest has
	Language string   `json:"language"`
	Packages []string `json:"packages"`
	Reason   string   `json:"reason"`
}

func (p *pkgRun) Packages(ctx context.Context, request []byte) []byte {
	var req pkgRequest
	if err := json.Unmarshal(request, &req); err != nil {
		return pkgAnswer(map[string]any{"error": "execd.packages: the request is not JSON: " + err.Error(), "code": "invalid"})
	}
	lang := p.lang
	switch req.Op {
	case "npm", "python":
		lock, gen, err := readLock(p.disk)
		if err != nil {
			return pkgFailure(err)
		}
		if gen == req.Have && req.Have != "" {
			return pkgAnswer(map[string]any{"unchanged": true})
		}
		defer p.m.beginPackages()() // the view may fetch
		ans, ok := p.view(ctx, req.Op, lock, gen, nil)
		// A lock no install of this process wrote (the code wrote it, or
		// execd restarted) is held to the disk as an install is, once:
		// its view may have fetched what the cache lacked. What it
		// fetched is charged either way, even when the view failed part
		// way (the lock uses it).
		var refused error
		p.m.fitPackages(p.w, p.disk, func(fit func(*packages.Lock, int) error) {
			if ok && gen != "" && !p.m.accepted.is(p.w.dir, req.Op, gen) {
				size := int64(0)
				if info, err := p.disk.Info(LockPath); err == nil {
					size = info.Size()
				}
				if refused = fit(lock, int(size)); refused == nil {
					p.m.accepted.set(p.w.dir, req.Op, gen)
				}
			}
			p.m.recheckLocked(p.w, true)
		})
		if refused != nil {
			return pkgFailure(refused)
		}
		return ans
	case "install":
		defer p.m.beginPackages()() // and its view, as the one above
		if req.Language != "" {
			lang = req.Language
		}
		inst, err := p.m.install(ctx, p.w, p.disk, lang, req.Packages)
		if err != nil {
			return pkgFailure(err)
		}
		lock, gen, err := readLock(p.disk)
		if err != nil {
			return pkgFailure(err)
		}
		ans, _ := p.view(ctx, viewOp(lang), lock, gen, &inst)
		return ans
	}
	return pkgAnswer(map[string]any{"error": "execd.packages: unknown op " + strconvQuote(req.Op), "code": "invalid"})
}

// view is the answer with the tree (npm) or the sys.path entries
// (python) of lock, paths under worker.PackagesMount.
func (p *pkgRun) view(ctx context.Context, op string, lock *packages.Lock, gen string, inst *Installed) (answer []byte, ok bool) {
	svc := p.m.cfg.Packages
	ans := map[string]any{"gen": gen}
	if inst != nil {
		added := make([]map[string]any, 0, len(inst.Added))
		for _, a := range inst.Added {
			added = append(added, map[string]any{"name": a.Name, "version": a.Version, "bytes": a.Bytes})
		}
		ans["installed"] = added
	}
	switch op {
	case "npm":
		t, err := svc.NPM(ctx, lock)
		if err != nil {
			return pkgFailure(packagesError(err)), false
		}
		ans["tree"] = t
	default:
		env, err := svc.Python(ctx, lock)
		if err != nil {
			return pkgFailure(packagesError(err)), false
		}
		paths := make([]string, len(env.Paths))
		for i, d := range env.Paths {
			paths[i] = path.Join(worker.PackagesMount, d)
		}
		ans["paths"] = paths
	}
	return pkgAnswer(ans), true
}

func pkgFailure(err error) []byte {
	code := "failed"
	var we *Error
	var pe *packages.Error
	msg := err.Error()
	if errors.As(err, &pe) {
		code = string(pe.Code)
	}
	if errors.As(err, &we) {
		msg = we.Msg
	}
	return pkgAnswer(map[string]any{"error": msg, "code": code})
}

func pkgAnswer(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":"execd.packages: the answer could not be encoded","code":"failed"}`)
	}
	return b
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
