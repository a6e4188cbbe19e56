package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// TrimAfter is how long a workspace's live interpreters are idle before the
// janitor trims them (Trimmer): they give back the base image pages
// they only read, which the next call maps again. Long enough that the
// calls of a burst never pay for that, short against HibernateAfter. See
// RATIONALE.md, "Why are idle interpreters trimmed?".
const TrimAfter = 30 * time.Second

// janitor trims workspaces idle for TrimAfter, hibernates those idle for
// HibernateAfter and drops the state of those idle for IdleTTL. It trims
// every quarter of TrimAfter, and checks the other two every quarter of
// the shorter of them (at least every second, at most every minute), so a
// workspace goes within 1.25 times its delay.
func (m *Manager) janitor() {
	defer close(m.janitorDone)
	d := m.cfg.HibernateAfter
	if d == 0 || m.cfg.IdleTTL > 0 && m.cfg.IdleTTL < d {
		d = m.cfg.IdleTTL
	}
	var tidy <-chan time.Time // nil: neither is set
	if d > 0 {
		t := time.NewTicker(min(max(d/4, time.Second), time.Minute))
		defer t.Stop()
		tidy = t.C
	}
	trim := time.NewTicker(TrimAfter / 4)
	defer trim.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-tidy:
			m.tidy(now)
		case now := <-trim.C:
			m.trimIdle(now)
		}
	}
}

// trimIdle trims the live interpreters of the workspaces idle since
// TrimAfter before now. It does not take their turns: a turn would move
// each workspace to the front of the idle roots (keepRootLocked) and make
// a call that arrives wait for the trims of others. Trimmer.Trim never
// waits and leaves a runner in a call alone, and a runner not used since
// its last trim returns at once, so every idle one is asked each round.
func (m *Manager) trimIdle(now time.Time) {
	cutoff := now.Add(-TrimAfter)
	var ts []Trimmer
	m.mu.Lock()
	for _, w := range m.wss {
		if w.busy || w.lastUsed.After(cutoff) {
			continue
		}
		for _, r := range w.runners {
			if t, ok := r.(Trimmer); ok {
				ts = append(ts, t)
			}
		}
	}
	m.mu.Unlock()
	var freed int64
	for _, t := range ts {
		freed += t.Trim()
	}
	if freed > 0 {
		m.log.Debug("trimmed idle interpreters", zap.Int64("bytes", freed))
	}
}

// tidy is one round of the janitor.
func (m *Manager) tidy(now time.Time) {
	ctx := context.Background()
	if ttl := m.cfg.IdleTTL; ttl > 0 {
		cutoff := now.Add(-ttl)
		for _, w := range m.claim(func(w *ws) bool { return !w.lastUsed.After(cutoff) }) {
			m.dropState(w, note(ReasonIdleTTL))
			m.releaseClaim(w)
		}
		if n := m.expireImages(cutoff); n > 0 {
			m.log.Debug("dropped saved interpreters idle beyond idle_ttl", zap.Int("count", n))
		}
	}
	if ha := m.cfg.HibernateAfter; ha > 0 {
		cutoff := now.Add(-ha)
		n := 0
		for _, w := range m.claim(func(w *ws) bool { return !w.lastUsed.After(cutoff) }) {
			saved, _ := m.hibernate(ctx, w, "")
			n += saved
			m.releaseClaim(w)
		}
		if n > 0 {
			m.log.Debug("hibernated idle workspaces", zap.Int("interpreters", n))
		}
	}
}

// claim takes the turn of every idle workspace with live runners that pick
// selects. The caller releases each turn.
func (m *Manager) claim(pick func(*ws) bool) []*ws {
	var out []*ws
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.wss {
		if len(w.runners) > 0 && !w.busy && pick(w) && m.tryTurnLocked(w) {
			w.refs++ // released by releaseClaim
			out = append(out, w)
		}
	}
	return out
}

// hibernate saves w's live interpreters to disk and closes them; the next
// run restores them. An interpreter that cannot be saved stays live when
// unsaved is empty; otherwise it is closed too and its note says unsaved
// (its state is lost). It returns how many interpreters were saved and why
// the first one kept live could not be. The caller holds w's turn.
func (m *Manager) hibernate(ctx context.Context, w *ws, unsaved ResetReason) (saved int, kept error) {
	rs, lastUsed := m.liveRunners(w)
	for lang, r := range rs {
		err := ctx.Err()
		var img Image
		if err == nil {
			img, err = r.Snapshot(ctx)
		}
		var size int64
		if err == nil {
			size, err = writeImage(w.state, binding{w.key, lang}, img, lastUsed)
			if err == nil {
				m.addDisk(w, imagePath(w.state, lang))
				err = writeNote(w.state, lang, noteSaved)
			}
			if err != nil {
				m.removeImage(w, lang)
				if e := m.fds.check(err); e == nil {
					m.log.Error("write image", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Error(err))
				}
			}
		}
		if err != nil {
			if unsaved == "" {
				if kept == nil {
					kept = fmt.Errorf("%s: %w", lang, err)
				}
				continue
			}
			m.log.Info("interpreter closed without saving", zap.String("workspace", w.key.id),
				zap.String("language", lang), zap.String("reason", string(unsaved)), zap.Error(err))
			m.closeRunner(w, lang, r)
			m.obs.StateLost(lang, unsaved)
			if err := writeNote(w.state, lang, note(unsaved)); err != nil {
				m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
			}
			continue
		}
		m.closeRunner(w, lang, r)
		m.obs.Hibernated(lang)
		saved++
		m.log.Debug("hibernated", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Int64("bytes", size))
	}
	return saved, kept
}

// liveRunners copies w's runners, and returns when it was last used.
func (m *Manager) liveRunners(w *ws) (map[string]Runner, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := make(map[string]Runner, len(w.runners))
	for l, r := range w.runners {
		rs[l] = r
	}
	return rs, w.lastUsed
}

// releaseClaim releases a turn taken by claim or pickLRU.
func (m *Manager) releaseClaim(w *ws) {
	m.releaseTurn(w)
	m.unref(w)
}

// hibernateAll hibernates every idle live workspace, several at once, until
// ctx ends; interpreters that cannot be saved are closed (their next start
// says ReasonRestarted). It returns how many were saved.
func (m *Manager) hibernateAll(ctx context.Context) int {
	claimed := m.claim(func(*ws) bool { return true })
	var saved atomic.Int64
	var wg sync.WaitGroup
	next := make(chan *ws)
	for range min(runtime.NumCPU(), max(len(claimed), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range next {
				n, _ := m.hibernate(ctx, w, ReasonRestarted)
				saved.Add(int64(n))
				m.releaseClaim(w)
			}
		}()
	}
	for _, w := range claimed {
		next <- w
	}
	close(next)
	wg.Wait()
	return int(saved.Load())
}

// pickLRU takes the turn of the least recently used idle workspace with
// live runners, or returns nil. The caller releases it with releaseClaim.
func (m *Manager) pickLRU() *ws { return m.pickLRUOf("") }

// pickLRUOf is pickLRU among the workspaces of the principal whose
// directory is pdir ("": every principal's).
func (m *Manager) pickLRUOf(pdir string) *ws {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lru *ws
	for _, w := range m.wss {
		if pdir != "" && w.key.pdir != pdir {
			continue
		}
		if len(w.runners) > 0 && !w.busy && (lru == nil || w.lastUsed.Before(lru.lastUsed)) {
			lru = w
		}
	}
	if lru == nil || !m.tryTurnLocked(lru) {
		return nil
	}
	lru.refs++
	return lru
}

// shed hibernates least recently used idle workspaces until enough, given
// the bytes freed so far, reports true or none is left (every live
// workspace is busy), and returns the bytes freed. Interpreters that cannot
// be saved are dropped (ReasonEvicted): the bound matters more.
func (m *Manager) shed(enough func(freed int64) bool) int64 {
	// One shed at a time: a second one (the shedder after a turn, a new
	// interpreter making room, a guest's growth) starts from what the
	// first left, instead of picking more victims for the same need.
	m.shedMu.Lock()
	defer m.shedMu.Unlock()
	var freed int64
	for !enough(freed) {
		w := m.pickLRU()
		if w == nil {
			m.log.Debug("nothing idle to hibernate: every live workspace is busy")
			break
		}
		before := m.heldBy(w)
		m.hibernate(context.Background(), w, ReasonEvicted)
		freed += before - m.heldBy(w)
		m.releaseClaim(w)
	}
	return freed
}

// heldBy is the memory w's live interpreters held after their last runs.
// principalRoom makes the room a new interpreter of w's principal needs
// within its share (Config.MaxMemoryPerPrincipal): while the principal's
// live interpreters hold the share or more, its least recently used idle
// workspace is hibernated; when every one of them is busy (running, or
// its code waiting for input), the principal gets LimitReached, and no
// other principal's workspace is touched.
func (m *Manager) principalRoom(w *ws) error {
	share := m.cfg.MaxMemoryPerPrincipal
	if share <= 0 {
		return nil
	}
	for {
		held := m.heldByPrincipal(w.key.pdir)
		if held < share {
			return nil
		}
		lru := m.pickLRUOf(w.key.pdir)
		if lru == nil {
			return &Error{Code: LimitReached, Msg: fmt.Sprintf("this token's interpreters hold %d MiB, its share of the memory budget "+
				"(limits.max_memory_per_principal_mib = %d), and all of them are running or waiting for input: "+
				"let one finish, answer its input, or reset it, then call again; the code did not run", held>>20, share>>20)}
		}
		m.hibernate(context.Background(), lru, ReasonEvicted)
		m.releaseClaim(lru)
	}
}

// heldByPrincipal is the memory the live interpreters of the principal
// whose directory is pdir hold.
func (m *Manager) heldByPrincipal(pdir string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k, w := range m.wss {
		if k.pdir != pdir {
			continue
		}
		for _, b := range w.mem {
			n += b
		}
	}
	return n
}

func (m *Manager) heldBy(w *ws) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, b := range w.mem {
		n += b
	}
	return n
}

// shedder brings the live interpreters back under MaxWorkspaces and
// MemoryBudget after calls that ran above them end. A new interpreter makes
// room before it starts (makeRoom), but it cannot hibernate workspaces that
// are busy, so the limits can be exceeded while every live workspace is
// running; without this, they would stay exceeded until the next new
// interpreter. It runs until Close, outside any call, so no call waits for
// the hibernations.
func (m *Manager) shedder() {
	defer close(m.shedDone)
	for {
		select {
		case <-m.stop:
			return
		case <-m.overLimit:
			m.makeRoom(0)
			m.fitMemory()
		}
	}
}

// overLimitLocked reports whether the live interpreters exceed
// MaxWorkspaces or MemoryBudget. m.mu is held.
func (m *Manager) overLimitLocked() bool {
	return m.cfg.MaxWorkspaces > 0 && m.live > m.cfg.MaxWorkspaces ||
		m.cfg.MemoryBudget > 0 && m.memoryLocked() > m.cfg.MemoryBudget
}

// makeRoom makes n more runners fit under MaxWorkspaces (see shed).
func (m *Manager) makeRoom(n int) {
	if m.cfg.MaxWorkspaces <= 0 {
		return
	}
	m.shed(func(int64) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.live+n <= m.cfg.MaxWorkspaces
	})
}

// fitMemory brings the memory of the live interpreters under MemoryBudget
// (see shed).
func (m *Manager) fitMemory() {
	if m.cfg.MemoryBudget <= 0 {
		return
	}
	m.shed(func(int64) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.memoryLocked() <= m.cfg.MemoryBudget
	})
}

// Reclaim hibernates idle workspaces, least recently used first, until
// their interpreters held need bytes or nothing idle is left, and returns
// the bytes freed. The sandbox calls it before it refuses a guest's memory
// growth for want of budget. It never waits for a busy workspace.
func (m *Manager) Reclaim(need int64) int64 {
	return m.shed(func(freed int64) bool { return freed >= need })
}

// expireImages drops the saved interpreters whose workspace was last used
// before cutoff (an image's modification time is its workspace's last use)
// and notes ReasonIdleTTL. Workspaces busy right now are skipped.
func (m *Manager) expireImages(cutoff time.Time) int {
	n := 0
	principals, _ := os.ReadDir(m.cfg.DataDir)
	for _, p := range principals {
		sroot := filepath.Join(m.cfg.DataDir, p.Name(), stateDirName)
		states, _ := os.ReadDir(sroot)
		for _, s := range states {
			if ValidateID(s.Name()) != nil {
				continue
			}
			files, _ := os.ReadDir(filepath.Join(sroot, s.Name()))
			stale := false
			for _, f := range files {
				if lang, ok := strings.CutSuffix(f.Name(), ".img"); ok && safeLanguage(lang) {
					if info, err := f.Info(); err == nil && info.ModTime().Before(cutoff) {
						stale = true
					}
				}
			}
			if stale && m.expire(p.Name(), s.Name(), cutoff) {
				n++
			}
		}
	}
	return n
}

// expire drops the stale images of one workspace under its turn, unless
// it is busy or live.
func (m *Manager) expire(pdir, id string, cutoff time.Time) bool {
	m.mu.Lock()
	w := m.refLocked(key{pdir, id})
	if len(w.runners) > 0 || !m.tryTurnLocked(w) {
		m.mu.Unlock()
		m.unref(w)
		return false
	}
	m.mu.Unlock()
	defer m.releaseClaim(w)
	dropped := false
	for _, lang := range m.langs.offered() {
		p := imagePath(w.state, lang)
		if info, err := os.Stat(p); err == nil && info.ModTime().Before(cutoff) {
			m.removeImage(w, lang)
			m.obs.StateLost(lang, ReasonIdleTTL)
			if err := writeNote(w.state, lang, note(ReasonIdleTTL)); err != nil {
				m.log.Error("workspace state note", zap.String("workspace", id), zap.Error(err))
			}
			dropped = true
		}
	}
	return dropped
}

// Hibernate saves the workspace's live interpreters to disk and closes
// them now, as idleness would after HibernateAfter; the next call restores
// them. It takes the workspace's turn like Reset. An interpreter that
// cannot be saved stays live, and the error says so (ErrNotSaveable).
func (m *Manager) Hibernate(ctx context.Context, principal, id string) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		_, kept := m.hibernate(ctx, w, "")
		if kept == nil {
			return nil
		}
		if errors.Is(kept, ErrNotSaveable) {
			return &Error{Code: NotSaveable, Err: kept, Msg: "an interpreter cannot be saved now: " + kept.Error()}
		}
		return &Error{Code: StartFailed, Err: kept, Msg: "could not save an interpreter: " + kept.Error()}
	})
}
