package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"execd/internal/worker"
)

// start is how a run's interpreter began.
type start struct {
	restored bool        // restored from an image
	lost     ResetReason // this language's earlier state was lost, and why
}

// open returns w's runner for lang: the live one, else one restored from
// the language's image, else a fresh one; start says which, and whether
// earlier state was lost. The caller holds w's turn. This and settle are
// the state model (RATIONALE.md, "What is the state model?").
func (m *Manager) open(ctx context.Context, w *ws, lang string, sink ProgressSink) (Runner, start, error) {
	m.mu.Lock()
	r, disk := w.runners[lang], w.disk
	m.mu.Unlock()
	if r != nil {
		return r, start{}, nil
	}
	outcome := OutcomeFailed
	defer func(end func(string)) { end(outcome) }(m.obs.Phase(ctx, PhaseStart, lang))
	if sink != nil && m.f.Compiling(lang) {
		sink.Progress(0, 0, "waiting for the "+lang+" guest to compile")
	}
	if err := m.principalRoom(w); err != nil {
		return nil, start{}, err
	}
	m.makeRoom(1)

	var st start
	n := readNote(w.state, lang)
	switch {
	case n.hasImage():
		var err error
		r, err = m.withRoom(func() (Runner, error) { return m.restoreImage(ctx, w, lang, disk, n == noteClone) })
		if err != nil {
			reason := imageReason(err)
			if reason == "" {
				if e := m.fds.check(err); e != nil {
					return nil, st, e
				}
				m.log.Warn("restore", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Error(err))
				return nil, st, &Error{Code: StartFailed, Msg: fmt.Sprintf("could not restore the %s interpreter: %v", lang, err), Err: err}
			}
			m.log.Warn("saved interpreter unusable; starting fresh", zap.String("workspace", w.key.id),
				zap.String("language", lang), zap.String("reason", string(reason)), zap.Error(err))
			st.lost = reason
			m.obs.StateLost(lang, reason)
		} else {
			st.restored = true
		}
	case n == noteLive:
		st.lost = ReasonRestarted
		m.obs.StateLost(lang, ReasonRestarted)
	case n != noteNone:
		st.lost = ResetReason(n)
	}
	if r == nil {
		var err error
		if r, err = m.newRunner(ctx, lang, disk); err != nil {
			if e := m.fds.check(err); e != nil {
				return nil, st, e
			}
			m.log.Warn("new runner", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Error(err))
			return nil, st, &Error{Code: StartFailed, Msg: fmt.Sprintf("could not start a %s interpreter: %v", lang, err), Err: err}
		}
	}
	// The note says "live" before the image goes: a crash in between is
	// then a reset (restarted), never an older state passed off as current.
	// An interpreter with no note before is marked in the journal instead,
	// one appended line rather than a file (journal.go).
	if err := m.markLive(w, lang, n); err != nil {
		m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
	}
	// Without a note there is no image to remove: an image is only ever
	// read after a note that names it, and one is written before its note.
	if n != noteNone {
		if err := m.removeImage(w, lang); err != nil {
			m.log.Error("remove image", zap.String("workspace", w.key.id), zap.Error(err))
		}
	}
	m.mu.Lock()
	w.runners[lang] = r
	m.setMemLocked(w, lang, r.MemoryBytes())
	m.live++
	m.mu.Unlock()
	outcome = OutcomeNew
	if st.restored {
		outcome = OutcomeRestored
	}
	return r, st, nil
}

// markLive marks lang's interpreter of w live before it runs: in the
// journal when it had no note (n), else by its note.
func (m *Manager) markLive(w *ws, lang string, n note) error {
	if n == noteNone && m.journal.live(w.key, lang) == nil {
		return nil
	}
	return writeNote(w.state, lang, noteLive)
}

// newRunner makes a fresh runner, making room in the memory budget if
// needed.
func (m *Manager) newRunner(ctx context.Context, lang string, disk Disk) (Runner, error) {
	return m.withRoom(func() (Runner, error) { return m.f.NewRunner(ctx, lang, disk) })
}

// withRoom calls make until it does not fail for want of memory budget,
// hibernating the least recently used idle workspace before each retry,
// as long as there is one.
func (m *Manager) withRoom(make func() (Runner, error)) (Runner, error) {
	for {
		r, err := make()
		if err == nil || !errors.Is(err, ErrMemoryBudget) {
			return r, err
		}
		w := m.pickLRU()
		if w == nil {
			return nil, err
		}
		m.hibernate(context.Background(), w, ReasonEvicted)
		m.releaseClaim(w)
	}
}

// restoreImage reads w's image of lang and restores a runner from it.
func (m *Manager) restoreImage(ctx context.Context, w *ws, lang string, disk Disk, clone bool) (Runner, error) {
	img, err := readImage(m.f, w.state, binding{w.key, lang})
	if err != nil {
		return nil, err
	}
	if img.Language() != lang {
		return nil, fmt.Errorf("%w: the image is of %s, not %s", ErrImageCorrupt, img.Language(), lang)
	}
	return m.f.Restore(ctx, img, disk, clone)
}

// imageReason classifies an error of ReadImage or Restore: the reason the
// image cannot be used, or "" for other failures (then it is kept).
func imageReason(err error) ResetReason {
	switch {
	case errors.Is(err, ErrImageStale):
		return ReasonImageStale
	case errors.Is(err, ErrImageCorrupt):
		return ReasonImageCorrupt
	}
	return ""
}

// settle decides what a run means for the workspace's state and returns
// the result as the user sees it: Reset (and Status reset for code that ran
// fine) when this language's earlier state is gone — lost before the run
// (start.lost), on a fresh instance that replaced one discarded earlier
// (worker.Result.FreshInstance), or with the instance the run used
// (worker.Result.Discarded, which closes the runner: the next run starts
// fresh and says so too, for a client that never saw this answer). This is
// the one place that decides; the worker only reports what happened. The
// caller holds w's turn.
func (m *Manager) settle(w *ws, lang string, r Runner, st start, res worker.Result) (Result, ResetReason) {
	reason := st.lost
	if res.FreshInstance && reason == "" {
		reason = ReasonCrashed
		m.obs.StateLost(lang, ReasonCrashed)
	}
	if res.Discarded != "" {
		discarded := ReasonCrashed
		if res.Discarded == worker.DiscardKilled {
			discarded = ReasonKilled
		}
		reason = discarded
		m.obs.StateLost(lang, discarded)
		m.closeRunner(w, lang, r)
		if err := writeNote(w.state, lang, note(discarded)); err != nil {
			m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
		}
	} else {
		mem := r.MemoryBytes()
		m.mu.Lock()
		if w.runners[lang] == r {
			m.setMemLocked(w, lang, mem)
		}
		m.mu.Unlock()
	}
	out := resultOf(res)
	out.Reset = reason != ""
	if out.Reset && out.Status == StatusOK {
		out.Status = StatusReset
	}
	return out, reason
}

// closeRunner forgets and closes w's runner for lang, if it is still r.
func (m *Manager) closeRunner(w *ws, lang string, r Runner) {
	m.mu.Lock()
	if w.runners[lang] != r {
		m.mu.Unlock()
		return
	}
	delete(w.runners, lang)
	m.forgetMemLocked(w, lang)
	m.live--
	m.mu.Unlock()
	if err := r.Close(); err != nil {
		m.log.Warn("close runner", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Error(err))
	}
}

// takeRunners detaches all of w's runners for the caller to close.
func (m *Manager) takeRunners(w *ws) map[string]Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := w.runners
	w.runners = map[string]Runner{}
	for lang := range w.mem {
		m.forgetMemLocked(w, lang)
	}
	m.live -= len(rs)
	return rs
}

func (m *Manager) closeRunners(k key, rs map[string]Runner) {
	for lang, r := range rs {
		if err := r.Close(); err != nil {
			m.log.Warn("close runner", zap.String("workspace", k.id), zap.String("language", lang), zap.Error(err))
		}
	}
}

// dropState ends every language's interpreter state of w — live runners
// closed, images removed — and notes why for each language that had some
// (noteNone forgets it). The caller holds w's turn.
func (m *Manager) dropState(w *ws, why note) {
	rs := m.takeRunners(w)
	m.closeRunners(w.key, rs)
	for _, lang := range m.langs.offered() {
		n := readNote(w.state, lang)
		if _, live := rs[lang]; !live && n == noteNone {
			continue
		}
		if why != noteNone && (rs[lang] != nil || n.hasImage()) {
			m.obs.StateLost(lang, ResetReason(why))
		}
		m.removeImage(w, lang)
		if err := writeNote(w.state, lang, why); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
		}
	}
}
