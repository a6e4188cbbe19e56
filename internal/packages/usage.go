package packages

import "time"

// Addresses are the cache addresses of every package the lock pins
// (npm and Python), each once: what a workspace of this lock uses of the
// shared cache.
func (l *Lock) Addresses() []string {
	if l == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, a := range l.addresses("") {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// EntrySize is the unpacked bytes of the cache entry at addr, as the
// cache's meta.json gives them (never a lock's word), and whether the
// cache has it.
func (s *Service) EntrySize(addr string) (int64, bool) {
	meta, ok := s.store.lookup(addr)
	return meta.Bytes, ok
}

// DiscardUnkept removes from the cache the entries this process fetched
// that kept says no one keeps (no workspace's lock uses them: an install
// that was refused or failed after fetching, a view of a lock that was
// then dropped), and returns how many and their bytes. Entries fetched
// earlier and kept are forgotten: they are never removed by this. The
// caller makes sure that no install or view that could use a fresh
// entry is under way (an entry it found would vanish under it).
func (s *Service) DiscardUnkept(kept func(addr string) bool) (entries int, bytes int64) {
	return s.store.discardUnkept(kept)
}

// Keep says that a workspace uses the entry at addr: if this process
// fetched it, DiscardUnkept leaves it alone from now on.
func (s *Service) Keep(addr string) {
	s.store.mu.Lock()
	delete(s.store.fresh, addr)
	s.store.mu.Unlock()
}

// Ranks of an entry for Evict.
const (
	EvictFirst = iota // no one uses it
	EvictLast         // removed only when the EvictFirst ones are not enough
	NeverEvict        // in use
)

// Evict removes cached entries, least recently used first, until the
// entries the cache knows take at most packages.max_cache_bytes (0: no
// limit, nothing is removed): those rank says EvictFirst, then, if that
// is not enough, those it says EvictLast; never one it says NeverEvict,
// nor one used within the last Options.EvictGrace. It returns how many
// it removed, their bytes, and the bytes the cache's entries take after.
// rank is asked only when something must go; the caller makes sure, as
// for DiscardUnkept, that nothing of its own is under way that could use
// an entry without rank knowing.
func (s *Service) Evict(rank func(addr string) int) (entries int, bytes, total int64) {
	if s.cfg.MaxCacheBytes <= 0 {
		return 0, 0, 0
	}
	return s.store.evict(s.cfg.MaxCacheBytes, time.Now().Add(-s.evictGrace), rank)
}
