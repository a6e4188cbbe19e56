package packages

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// store is the content-addressed cache: <cache_dir>/packages/<address>/,
// where the address is the hash of the file the package came from
// ("sha512-<hex>" for npm tarballs, "sha256-<hex>" for wheels). Each entry
// holds pkg/ (the unpacked files, what sandboxes read) and meta.json. An
// entry is made in a temporary directory and renamed into place whole, so
// an entry that exists is complete, and one copy serves every workspace.
type store struct {
	root string

	mu       sync.Mutex
	inflight map[string]*fill
	fresh    map[string]bool // entries this process made that no one has kept yet (Service.DiscardUnkept)
	// entries are the entries the store knows (found at start, made or
	// found since), with their bytes and when last used; total their
	// bytes. Entries another process makes are known once looked up.
	entries map[string]*entryUse
	total   int64
	// stuck is the total an evict left above its limit, and when: until
	// the total changes or a minute passes, evict does not look again
	// (looking reads every lock on disk).
	stuck   int64
	stuckAt time.Time
}

// entryUse is an entry's bytes and when it was last looked up or made.
type entryUse struct {
	bytes int64
	used  time.Time
}

type fill struct {
	done chan struct{}
	meta entryMeta
	err  error
}

// entryMeta is an entry's meta.json: what the host knows of the files it
// unpacked, so that nothing needs to trust the lock (which the workspace's
// code can write) for sizes or entry points.
type entryMeta struct {
	Ecosystem string `json:"ecosystem"` // "npm" or "pypi"
	Name      string `json:"name"`
	Version   string `json:"version"`
	Bytes     int64  `json:"bytes"`
	Files     int    `json:"files"`
	// Integrity is the npm tarball's sha512 integrity (SRI).
	Integrity string `json:"integrity,omitempty"`
	// NPM package.json fields a loader follows.
	Type    string          `json:"type,omitempty"`
	Main    string          `json:"main,omitempty"`
	Module  string          `json:"module,omitempty"`
	Exports json.RawMessage `json:"exports,omitempty"`
	// Wheel is the wheel's file name; Requires its METADATA's Requires-Dist.
	Wheel          string   `json:"wheel,omitempty"`
	Requires       []string `json:"requires,omitempty"`
	RequiresPython string   `json:"requires_python,omitempty"`
}

func newStore(root string) (*store, error) {
	if err := os.MkdirAll(filepath.Join(root, ".tmp"), 0o755); err != nil {
		return nil, err
	}
	s := &store{root: root, inflight: map[string]*fill{}, fresh: map[string]bool{}, entries: map[string]*entryUse{}}
	s.sweep(time.Now().Add(-time.Hour))
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		if m, ok := s.readMeta(e.Name()); ok {
			used := time.Time{}
			if info, err := e.Info(); err == nil {
				used = info.ModTime()
			}
			s.noteLocked(e.Name(), m.Bytes, used)
		}
	}
	return s, nil
}

// noteLocked records that the entry at addr, of bytes, was used at t.
// Callers hold s.mu (or own s alone).
func (s *store) noteLocked(addr string, bytes int64, t time.Time) {
	e := s.entries[addr]
	if e == nil {
		e = &entryUse{bytes: bytes}
		s.entries[addr] = e
		s.total += bytes
	}
	if t.After(e.used) {
		e.used = t
	}
}

// forgetLocked drops the entry at addr from what the store knows.
// Callers hold s.mu.
func (s *store) forgetLocked(addr string) {
	if e := s.entries[addr]; e != nil {
		s.total -= e.bytes
		delete(s.entries, addr)
	}
}

// sweep removes temporary directories older than before: what a process
// that stopped while unpacking left behind.
func (s *store) sweep(before time.Time) {
	tmp := filepath.Join(s.root, ".tmp")
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			removeAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// removeAll removes a tree whose files and directories may be read-only.
func removeAll(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// pkgDir is where an entry's files are, relative to the store's root.
func pkgDir(addr string) string { return addr + "/pkg" }

// lookup reads an entry's meta, if the entry is there, and notes the use.
func (s *store) lookup(addr string) (entryMeta, bool) {
	m, ok := s.readMeta(addr)
	if ok {
		s.mu.Lock()
		s.noteLocked(addr, m.Bytes, time.Now())
		s.mu.Unlock()
	}
	return m, ok
}

// readMeta reads an entry's meta, if the entry is there.
func (s *store) readMeta(addr string) (entryMeta, bool) {
	b, err := os.ReadFile(filepath.Join(s.root, addr, "meta.json"))
	if err != nil {
		return entryMeta{}, false
	}
	var m entryMeta
	if json.Unmarshal(b, &m) != nil {
		return entryMeta{}, false
	}
	return m, true
}

// ensure returns the entry at addr, making it with build when it is not
// there: build fills dir/pkg and returns the meta. Callers asking for the
// same address at once share one build.
func (s *store) ensure(addr string, build func(dir string) (entryMeta, error)) (entryMeta, error) {
	if m, ok := s.lookup(addr); ok {
		return m, nil
	}
	s.mu.Lock()
	if f, ok := s.inflight[addr]; ok {
		s.mu.Unlock()
		<-f.done
		return f.meta, f.err
	}
	f := &fill{done: make(chan struct{})}
	s.inflight[addr] = f
	s.mu.Unlock()
	f.meta, f.err = s.create(addr, build)
	s.mu.Lock()
	delete(s.inflight, addr)
	s.mu.Unlock()
	close(f.done)
	return f.meta, f.err
}

func (s *store) create(addr string, build func(dir string) (entryMeta, error)) (entryMeta, error) {
	if m, ok := s.lookup(addr); ok { // made by another process meanwhile
		return m, nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.root, ".tmp"), addr+"-*")
	if err != nil {
		return entryMeta{}, err
	}
	defer removeAll(tmp) // a no-op once renamed
	if err := os.Mkdir(filepath.Join(tmp, "pkg"), 0o755); err != nil {
		return entryMeta{}, err
	}
	m, err := build(tmp)
	if err != nil {
		return entryMeta{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return entryMeta{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), b, 0o444); err != nil {
		return entryMeta{}, err
	}
	if err := os.Rename(tmp, filepath.Join(s.root, addr)); err != nil {
		if m2, ok := s.lookup(addr); ok { // another process won the rename
			return m2, nil
		}
		return entryMeta{}, err
	}
	s.mu.Lock()
	s.fresh[addr] = true
	s.noteLocked(addr, m.Bytes, time.Now())
	s.mu.Unlock()
	return m, nil
}

// discardUnkept removes the fresh entries kept says no one keeps, and
// forgets the others (kept now, they are no longer fresh).
func (s *store) discardUnkept(kept func(addr string) bool) (n int, bytes int64) {
	s.mu.Lock()
	var fresh []string
	for a := range s.fresh {
		if _, filling := s.inflight[a]; !filling {
			fresh = append(fresh, a)
			delete(s.fresh, a)
		}
	}
	s.mu.Unlock()
	for _, a := range fresh { // kept may read the locks on disk: not under s.mu
		if kept(a) {
			continue
		}
		if b, ok := s.remove(a); ok {
			n++
			bytes += b
		}
	}
	return n, bytes
}

// evict removes entries until the ones the store knows take at most
// limit bytes: least recently used first among those rank says
// EvictFirst, then among those it says EvictLast; never one it says
// NeverEvict, one being made, or one used since notBefore. It returns
// how many it removed and their bytes, and the bytes the known entries
// take after.
func (s *store) evict(limit int64, notBefore time.Time, rank func(addr string) int) (n int, bytes, total int64) {
	s.mu.Lock()
	if s.total <= limit || (s.total == s.stuck && time.Since(s.stuckAt) < time.Minute) {
		total = s.total
		s.mu.Unlock()
		return 0, 0, total
	}
	type cand struct {
		addr string
		used time.Time
	}
	var cands []cand
	for a, e := range s.entries {
		if _, filling := s.inflight[a]; filling || !e.used.Before(notBefore) {
			continue
		}
		cands = append(cands, cand{a, e.used})
	}
	over := s.total - limit
	s.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].used.Before(cands[j].used) })
	var last []string
	for _, c := range cands {
		if bytes >= over {
			break
		}
		switch rank(c.addr) {
		case EvictFirst:
			if b, ok := s.remove(c.addr); ok {
				n++
				bytes += b
			}
		case EvictLast:
			last = append(last, c.addr)
		}
	}
	for _, a := range last {
		if bytes >= over {
			break
		}
		if b, ok := s.remove(a); ok {
			n++
			bytes += b
		}
	}
	s.mu.Lock()
	total = s.total
	if total > limit {
		// What is left is in use, or used lately: do not read every lock
		// again for the same total before a minute has passed.
		s.stuck, s.stuckAt = total, time.Now()
	}
	s.mu.Unlock()
	return n, bytes, total
}

// remove takes the entry at addr out of the cache: it leaves its address
// at once (renamed aside, then removed), so a lookup never sees it half
// removed. It returns the entry's bytes and whether it was there.
func (s *store) remove(addr string) (int64, bool) {
	m, _ := s.readMeta(addr)
	aside, err := os.MkdirTemp(filepath.Join(s.root, ".tmp"), addr+"-gone-*")
	if err != nil {
		return 0, false
	}
	defer removeAll(aside)
	err = os.Rename(filepath.Join(s.root, addr), filepath.Join(aside, "entry"))
	s.mu.Lock()
	delete(s.fresh, addr)
	s.forgetLocked(addr)
	s.mu.Unlock()
	return m.Bytes, err == nil
}

// digest is one hash of an integrity string.
type digest struct {
	algo string // sha512, sha384, sha256 or sha1
	sum  []byte
}

func (d digest) hash() hash.Hash {
	switch d.algo {
	case "sha512":
		return sha512.New()
	case "sha384":
		return sha512.New384()
	case "sha256":
		return sha256.New()
	}
	return sha1.New()
}

func (d digest) sri() string { return d.algo + "-" + base64.StdEncoding.EncodeToString(d.sum) }

// address is the cache address of a file with this digest.
func (d digest) address() string { return d.algo + "-" + hex.EncodeToString(d.sum) }

var algoRank = map[string]int{"sha1": 1, "sha256": 2, "sha384": 3, "sha512": 4}
var algoSize = map[string]int{"sha1": 20, "sha256": 32, "sha384": 48, "sha512": 64}

// parseIntegrity reads a Subresource Integrity string ("sha512-<base64>",
// possibly several separated by blanks, options after "?") and returns the
// strongest hash it names.
func parseIntegrity(s string) (digest, bool) {
	var best digest
	for _, f := range strings.Fields(s) {
		algo, b64, ok := strings.Cut(f, "-")
		if !ok || algoRank[algo] == 0 {
			continue
		}
		b64, _, _ = strings.Cut(b64, "?")
		sum, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sum) != algoSize[algo] {
			continue
		}
		if algoRank[algo] > algoRank[best.algo] {
			best = digest{algo, sum}
		}
	}
	return best, best.algo != ""
}

// parseHexDigest reads a hex digest ("sha256" and 64 hex digits, npm's
// shasum and an index's #sha256=).
func parseHexDigest(algo, h string) (digest, bool) {
	sum, err := hex.DecodeString(h)
	if err != nil || algoSize[algo] == 0 || len(sum) != algoSize[algo] {
		return digest{}, false
	}
	return digest{algo, sum}, true
}
