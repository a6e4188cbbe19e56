package packages

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

// EntryBytes are the unpacked bytes of the cache entries the lock uses,
// by address, as the cache's meta.json gives them (never the lock's
// word); entries not in the cache are left out.
func (s *Service) EntryBytes(l *Lock) map[string]int64 {
	out := map[string]int64{}
	for _, a := range l.Addresses() {
		if meta, ok := s.store.lookup(a); ok {
			out[a] = meta.Bytes
		}
	}
	return out
}
