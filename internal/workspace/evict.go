package workspace

import (
	"time"

	"go.uber.org/zap"
)

// janitor evicts workspaces idle for IdleTTL. It checks every quarter TTL
// (at least every second, at most every minute), so an idle workspace goes
// within 1.25 TTL.
func (m *Manager) janitor() {
	defer close(m.janitorDone)
	every := min(max(m.cfg.IdleTTL/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			cutoff := now.Add(-m.cfg.IdleTTL)
			if n := m.evict(func(w *ws) bool { return !w.lastUsed.After(cutoff) }); n > 0 {
				m.log.Debug("evicted idle workspaces", zap.Int("count", n))
			}
		}
	}
}

// evictable reports whether w's runners may be closed now: it has some and
// no call holds or awaits its turn.
func evictable(w *ws) bool {
	return len(w.runners) > 0 && !w.busy
}

// evict closes the runners of every evictable workspace that pick selects
// and forgets the records nothing else needs. Files stay. It returns the
// number of workspaces evicted.
func (m *Manager) evict(pick func(*ws) bool) int {
	var vs []detached
	m.mu.Lock()
	for _, w := range m.wss {
		if evictable(w) && pick(w) {
			vs = append(vs, m.detachLocked(w))
		}
	}
	m.mu.Unlock()
	for _, v := range vs {
		m.closeRunners(v.w.key, v.rs)
		closeFS(v.fs)
	}
	return len(vs)
}

// detachLocked takes w's runners away (the record remembers which
// languages it had, should it stay) and drops the record if unreferenced.
func (m *Manager) detachLocked(w *ws) detached {
	v := detached{w: w, rs: w.runners}
	w.runners = map[string]Runner{}
	m.live -= len(v.rs)
	v.fs = m.maybeDropLocked(w) // nil while the record stays: the next runner reuses it
	return v
}

// detached is what eviction took from a workspace, to close outside the lock.
type detached struct {
	w  *ws
	rs map[string]Runner
	fs *QuotaFS
}

// makeRoom evicts least recently used idle workspaces until n more runners
// fit under MaxWorkspaces, or nothing more can be evicted (every live
// workspace is busy: the cap is then exceeded rather than a call refused).
func (m *Manager) makeRoom(n int) {
	if m.cfg.MaxWorkspaces <= 0 {
		return
	}
	for {
		m.mu.Lock()
		if m.live+n <= m.cfg.MaxWorkspaces {
			m.mu.Unlock()
			return
		}
		var lru *ws
		for _, w := range m.wss {
			if evictable(w) && (lru == nil || w.lastUsed.Before(lru.lastUsed)) {
				lru = w
			}
		}
		if lru == nil {
			m.mu.Unlock()
			m.log.Debug("max_workspaces exceeded: every live workspace is busy")
			return
		}
		v := m.detachLocked(lru)
		m.mu.Unlock()
		m.closeRunners(v.w.key, v.rs)
		closeFS(v.fs)
	}
}
