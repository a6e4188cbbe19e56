package workspace

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"
)

// Reset drops the workspace's interpreter state, live or saved; with files
// it also empties its directory. Checkpoints are kept. It waits for the
// workspace's earlier calls. The next run starts fresh and says so
// (ReasonResetByUser).
func (m *Manager) Reset(ctx context.Context, principal, id string, files bool) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		if err := checkDirs(w.dir, w.state, m.langs.offered()); err != nil {
			return &Error{Code: StartFailed, Msg: "could not reset the workspace", Err: err}
		}
		m.dropState(w, note(ReasonResetByUser))
		if !files {
			return nil
		}
		m.forgetDisk(w)
		m.forgetRecent(w.key)
		return m.metered(w, func() error {
			if err := os.RemoveAll(w.dir); err != nil {
				return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
			}
			// An empty directory in its place: the workspace may have
			// nothing else that says it exists.
			if err := makeFilesDir(m.spares, w.dir, w.state, m.langs.offered()); err != nil {
				return &Error{Code: StartFailed, Msg: "could not recreate the workspace's directory", Err: err}
			}
			return nil
		})
	})
}

// forgetFS closes w's file system so that the next turn measures the
// directory anew (after its content was replaced). The caller holds w's
// turn and has closed w's runners.
func (m *Manager) forgetDisk(w *ws) {
	m.mu.Lock()
	disk := w.disk
	w.disk = nil
	m.mu.Unlock()
	closeDisk(disk)
}

// Delete closes the workspace's interpreters and removes its files, images
// and checkpoints. It waits for the workspace's earlier calls; calls queued
// behind it find a new, empty workspace of the same id.
func (m *Manager) Delete(ctx context.Context, principal, id string) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		m.closeRunners(w.key, m.takeRunners(w))
		m.forgetDisk(w)
		m.mu.Lock()
		w.ready = false
		m.mu.Unlock()
		m.forgetRecent(w.key)
		// The journal first: a crash during the removal must not mark the
		// workspace lost, which would bring it back (journal.go).
		if err := m.journal.deleted(w.key); err != nil {
			m.log.Error("live journal", zap.String("workspace", w.key.id), zap.Error(err))
		}
		return m.metered(w, func() error {
			// The state goes first: files without state read as a workspace
			// whose state was lost, state without files as one with no files.
			if err := os.RemoveAll(w.state); err != nil {
				return &Error{Code: StartFailed, Msg: "could not delete the workspace's saved state", Err: err}
			}
			if err := os.RemoveAll(w.dir); err != nil {
				return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
			}
			return nil
		})
	})
}

// Drain tells every call still waiting for a workspace's turn or a run slot
// — whose code has not started — at once that execd is shutting down, and
// refuses new calls the same way. Running calls go on. Drain returns at
// once and is idempotent; Close drains too.
func (m *Manager) Drain() {
	m.drainOnce.Do(func() {
		m.mu.Lock()
		m.draining = true
		m.mu.Unlock()
		close(m.drained)
	})
}

// Close drains, stops the janitor and hibernates every live workspace:
// idle ones at once, the others as their running calls end. When ctx ends
// first, what is left is closed without saving (under running calls, which
// then end with an error result; the next start says ReasonRestarted) and
// ctx's error is returned. Close is idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.Drain()
		m.mu.Lock()
		m.closed = true
		m.signalIdleLocked()
		m.mu.Unlock()
		close(m.stop)
	})
	<-m.janitorDone
	<-m.sweepDone
	<-m.shedDone
	start := time.Now()
	saved := m.hibernateAll(ctx)
	select {
	case <-m.idle:
		saved += m.hibernateAll(ctx) // calls that ended after the first sweep
	case <-ctx.Done():
	}
	var all []*ws
	m.mu.Lock()
	for _, w := range m.wss {
		all = append(all, w)
	}
	m.mu.Unlock()
	lost := 0
	for _, w := range all {
		rs := m.takeRunners(w)
		lost += len(rs)
		for lang := range rs {
			m.obs.StateLost(lang, ReasonRestarted)
		}
		m.closeRunners(w.key, rs)
	}
	if saved+lost > 0 {
		m.log.Info("workspaces saved", zap.Int("interpreters", saved), zap.Int("not saved", lost), zap.Duration("took", time.Since(start)))
	}
	// The spares go first: they are removed by the journal's compaction
	// while the journal is there.
	m.spares.close()
	// Every interpreter the journal marked now has a note, unless some
	// were closed unsaved: then the next start compacts it.
	m.journal.close(lost == 0 && ctx.Err() == nil)
	return ctx.Err()
}
