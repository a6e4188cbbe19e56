package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"execd/internal/atomicfile"
	"execd/internal/guestfs"
)

// MaxCheckpoints is the most checkpoints one workspace keeps; Checkpoint
// refuses more (delete the workspace, or fork it, to start over).
const MaxCheckpoints = 32

const checkpointRule = "checkpoint name must be 1–64 characters of A-Z a-z 0-9 . _ - (and not \".\" or \"..\")"

func validateCheckpoint(name string) error {
	if ValidateID(name) != nil {
		return &Error{Code: InvalidID, Msg: fmt.Sprintf("%s; got %q", checkpointRule, clip(name))}
	}
	return nil
}

// Checkpoint saves the workspace's interpreters (every language with
// state, live or hibernated) and a copy of its files under name, or under a
// generated name ("cp-1", "cp-2", …) when name is empty, and returns the
// name. It takes the workspace's turn like Reset; the workspace carries on
// unchanged. It fails, changing nothing, when a live interpreter cannot be
// saved (ErrNotSaveable: it holds open files), the name is taken (Exists)
// or the workspace has MaxCheckpoints already (LimitReached).
func (m *Manager) Checkpoint(ctx context.Context, principal, id, name string) (string, error) {
	if name != "" {
		if err := validateCheckpoint(name); err != nil {
			return "", err
		}
	}
	err := m.turnUnlessAsking(ctx, principal, id, true, refuseAsking("checkpointed"), func(w *ws) error {
		if _, err := m.prepare(w); err != nil {
			return err
		}
		root := filepath.Join(w.state, checkpointDirName)
		if err := mkdirState(root); err != nil {
			return stateError("could not create the checkpoint", err)
		}
		existing := m.checkpoints(w.state)
		if name == "" {
			name = nextCheckpointName(existing)
		}
		for _, c := range existing {
			if c.Name == name {
				return &Error{Code: Exists, Msg: fmt.Sprintf("workspace %q already has a checkpoint %q", id, name)}
			}
		}
		if len(existing) >= MaxCheckpoints {
			return &Error{Code: LimitReached, Msg: fmt.Sprintf("workspace %q has %d checkpoints, the most it may keep", id, MaxCheckpoints)}
		}
		tmp, err := os.MkdirTemp(root, tmpPrefix)
		if err != nil {
			return stateError("could not create the checkpoint", err)
		}
		done := false
		defer func() {
			if !done {
				os.RemoveAll(tmp)
			}
		}()
		if err := m.saveInterpreters(ctx, w, tmp, w.key, false); err != nil {
			return err
		}
		// A workspace that wrote nothing has no files directory: its
		// checkpoint holds an empty one.
		cp := filepath.Join(tmp, filesDirName)
		if exists(w.dir) {
			err = guestfs.CopyTree(w.dir, cp)
		} else {
			err = os.Mkdir(cp, 0o700)
		}
		if err != nil {
			return stateError("could not copy the workspace's files", err)
		}
		taken, err := m.takeDisk(w, "the checkpoint", tmp)
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(root, name)); err != nil {
			m.budgetOf(w.key.pdir).Add(-taken)
			return stateError("could not create the checkpoint", err)
		}
		done = true
		if err := atomicfile.SyncDir(root); err != nil {
			m.log.Warn("sync checkpoint directory", zap.Error(err))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// nextCheckpointName is "cp-N" for the first N above every such name.
func nextCheckpointName(existing []CheckpointInfo) string {
	n := 0
	for _, c := range existing {
		if s, ok := strings.CutPrefix(c.Name, "cp-"); ok {
			if k, err := strconv.Atoi(s); err == nil && k > n {
				n = k
			}
		}
	}
	return "cp-" + strconv.Itoa(n+1)
}

// saveInterpreters writes every language's interpreter state of w into
// dir (images and notes) for the workspace to (w's own for a checkpoint, a
// fork's), its images bound to to: live ones by Snapshot, hibernated ones
// by sharing their image file (images are only ever replaced, never
// changed in place), or for another workspace by copying it with the new
// binding (an image w cannot use itself gives the fork the same reason).
// With clone the notes ask for fresh random seeds on restore. The caller
// holds w's turn.
func (m *Manager) saveInterpreters(ctx context.Context, w *ws, dir string, to key, clone bool) error {
	rs, lastUsed := m.liveRunners(w)
	withImage := noteSaved
	if clone {
		withImage = noteClone
	}
	for _, lang := range m.langs.offered() {
		if r := rs[lang]; r != nil {
			img, err := r.Snapshot(ctx)
			if err != nil {
				if errors.Is(err, ErrNotSaveable) {
					return &Error{Code: NotSaveable, Err: err, Msg: fmt.Sprintf("the %s interpreter cannot be saved now: %v", lang, err)}
				}
				return &Error{Code: StartFailed, Err: err, Msg: fmt.Sprintf("could not save the %s interpreter: %v", lang, err)}
			}
			if _, err := writeImage(dir, binding{to, lang}, img, lastUsed); err != nil {
				return stateError("could not write the "+lang+" interpreter's image", err)
			}
			if err := writeNote(dir, lang, withImage); err != nil {
				return stateError("could not write the "+lang+" interpreter's image", err)
			}
			continue
		}
		n := readNote(w.state, lang)
		switch {
		case n.hasImage():
			var err error
			if to == w.key {
				err = guestfs.ShareFile(imagePath(w.state, lang), imagePath(dir, lang))
			} else {
				err = rebindImage(w.state, binding{w.key, lang}, dir, binding{to, lang})
			}
			if reason := imageReason(err); reason != "" {
				n = note(reason)
			} else if err != nil {
				return stateError("could not copy the "+lang+" interpreter's image", err)
			} else if clone {
				n = noteClone
			}
			if err := writeNote(dir, lang, n); err != nil {
				return stateError("could not copy the "+lang+" interpreter's image", err)
			}
		case n == noteLive: // live in an execd that is gone: lost
			n = note(ReasonRestarted)
			fallthrough
		case n != noteNone:
			if err := writeNote(dir, lang, n); err != nil {
				return stateError("could not save the workspace's state", err)
			}
		}
	}
	return nil
}

// refuseAsking is the answer of a checkpoint or fork (what) of a workspace
// whose code waits for input: its interpreter is in the middle of a run
// and cannot be saved, and the answer may take up to
// protocol.input_timeout, too long to wait.
func refuseAsking(what string) func(*ws) error {
	return func(w *ws) error {
		return &Error{Code: NotSaveable, Err: ErrNotSaveable, Msg: fmt.Sprintf("workspace %q cannot be %s now: its code is waiting for input, "+
			"and an interpreter in the middle of a run cannot be saved; answer it (or reset the workspace), then try again; nothing was changed", w.key.id, what)}
	}
}

func stateError(msg string, err error) *Error {
	return &Error{Code: StartFailed, Msg: msg, Err: err}
}

// RestoreCheckpoint puts the workspace back as it was at the checkpoint:
// its files are replaced by the checkpoint's copy and its interpreters by
// the checkpoint's images (the next run of each language restores one,
// status ok; a language without state at the checkpoint starts fresh).
// Live interpreters are closed without saving. The checkpoint itself is
// kept. It takes the workspace's turn like Reset.
func (m *Manager) RestoreCheckpoint(ctx context.Context, principal, id, checkpoint string) error {
	if err := validateCheckpoint(checkpoint); err != nil {
		return err
	}
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		if _, err := m.prepare(w); err != nil {
			return err
		}
		return m.metered(w, func() error { return m.restoreCheckpoint(w, id, checkpoint) })
	})
}

// restoreCheckpoint is RestoreCheckpoint's work, holding w's turn.
func (m *Manager) restoreCheckpoint(w *ws, id, checkpoint string) error {
	src := filepath.Join(w.state, checkpointDirName, checkpoint)
	if st, err := os.Stat(filepath.Join(src, filesDirName)); err != nil || !st.IsDir() {
		return &Error{Code: NotFound, Msg: fmt.Sprintf("workspace %q has no checkpoint %q", id, checkpoint)}
	}
	// The copy is made beside the workspace's directory and swapped in,
	// so the files are never half replaced.
	tmp, err := os.MkdirTemp(filepath.Dir(w.dir), tmpPrefix)
	if err != nil {
		return stateError("could not restore the checkpoint's files", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Remove(tmp); err != nil {
		return stateError("could not restore the checkpoint's files", err)
	}
	if err := guestfs.CopyTree(filepath.Join(src, filesDirName), tmp); err != nil {
		return stateError("could not restore the checkpoint's files", err)
	}
	m.closeRunners(w.key, m.takeRunners(w))
	m.forgetDisk(w)
	m.forgetRecent(w.key)
	if err := swapDirs(w.dir, tmp); err != nil {
		return stateError("could not restore the checkpoint's files", err)
	}
	if err := mkdirState(w.state); err != nil {
		return stateError("could not restore the checkpoint's interpreters", err)
	}
	for _, lang := range m.langs.offered() {
		if err := ignoreMissing(os.Remove(imagePath(w.state, lang))); err != nil {
			return stateError("could not restore the checkpoint's interpreters", err)
		}
		n := readNote(src, lang)
		if n.hasImage() {
			if err := guestfs.ShareFile(imagePath(src, lang), imagePath(w.state, lang)); err != nil {
				return stateError("could not restore the checkpoint's interpreters", err)
			}
		}
		if err := writeNote(w.state, lang, n); err != nil {
			return stateError("could not restore the checkpoint's interpreters", err)
		}
	}
	return nil
}

// swapDirs exchanges the directories dir and other (atomically where the
// system can), so that dir holds what other held; other then holds the old
// content, for the caller to remove. A dir not made yet (a workspace that
// wrote nothing) is other, renamed.
func swapDirs(dir, other string) error {
	if exchange(dir, other) == nil {
		return nil
	}
	if !exists(dir) {
		return os.Rename(other, dir)
	}
	old := other + "~old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(other, dir); err != nil {
		os.Rename(old, dir)
		return err
	}
	return os.Rename(old, other)
}

// Fork makes a new workspace, newID (minted by Config.NewID when empty), of the
// same principal, holding a copy of the workspace's interpreters — cloned:
// their random generators are reseeded when they are restored — and of its
// files, and returns its id. The copy's files count against its own disk
// quota. Files are shared on disk where possible but behave as copies (see
// guestfs.CopyTree). It takes the source's turn like Reset, and fails when newID
// exists (Exists) or an interpreter cannot be saved (ErrNotSaveable).
func (m *Manager) Fork(ctx context.Context, principal, id, newID string) (string, error) {
	if newID == "" {
		newID = m.cfg.NewID()
	} else if err := ValidateID(newID); err != nil {
		return "", err
	}
	if newID == id {
		return "", &Error{Code: Exists, Msg: fmt.Sprintf("workspace %q exists", newID)}
	}
	err := m.turnUnlessAsking(ctx, principal, id, true, refuseAsking("forked"), func(src *ws) error {
		if _, err := m.prepare(src); err != nil {
			return err
		}
		// The source's turn first, the target's only if free: two forks in
		// opposite directions can never wait for each other.
		m.mu.Lock()
		t := m.refLocked(key{src.key.pdir, newID})
		if !m.tryTurnLocked(t) {
			m.mu.Unlock()
			m.unref(t)
			return &Error{Code: Exists, Msg: fmt.Sprintf("workspace %q exists", newID)}
		}
		inMemory := len(t.runners) > 0 || t.ready // one that has written nothing yet
		m.mu.Unlock()
		defer m.releaseClaim(t)
		if inMemory || exists(t.dir) || exists(t.state) {
			return &Error{Code: Exists, Msg: fmt.Sprintf("workspace %q exists", newID)}
		}
		m.createMu.Lock()
		err := m.roomForWorkspace(src.key.pdir)
		m.createMu.Unlock()
		if err != nil {
			return err // before any copy; checked again as the fork is put in place
		}
		if limit := m.cfg.diskQuota(); limit > 0 {
			if used, err := guestfs.Usage(src.dir); err == nil && guestfs.Excess(limit, 0, used) > 0 {
				return &Error{Code: LimitReached, Msg: fmt.Sprintf("the workspace's files (%d bytes) exceed the disk quota (workspace.max_disk_mib = %d)", used, m.cfg.MaxDiskMiB)}
			}
		}
		if err := mkdirState(filepath.Dir(t.state)); err != nil {
			return stateError("could not create the fork", err)
		}
		state, err := os.MkdirTemp(filepath.Dir(t.state), tmpPrefix)
		if err != nil {
			return stateError("could not create the fork", err)
		}
		defer os.RemoveAll(state)
		files, err := os.MkdirTemp(filepath.Dir(t.dir), tmpPrefix)
		if err != nil {
			return stateError("could not create the fork", err)
		}
		defer os.RemoveAll(files)
		if err := m.saveInterpreters(ctx, src, state, t.key, true); err != nil {
			return err
		}
		if err := os.Remove(files); err != nil {
			return stateError("could not create the fork", err)
		}
		withFiles := exists(src.dir) // a source that wrote nothing: neither does the fork
		if withFiles {
			if err := guestfs.CopyTree(src.dir, files); err != nil {
				return stateError("could not copy the workspace's files", err)
			}
		}
		m.createMu.Lock()
		defer m.createMu.Unlock()
		if err := m.roomForWorkspace(src.key.pdir); err != nil {
			return err
		}
		taken, err := m.takeDisk(src, "the fork", state, files)
		if err != nil {
			return err
		}
		// State first. A crash between the two renames leaves a workspace
		// with the fork's interpreters and no files, which List shows and
		// Delete removes.
		if err := os.Rename(state, t.state); err != nil {
			m.budgetOf(src.key.pdir).Add(-taken)
			return stateError("could not create the fork", err)
		}
		if withFiles {
			if err := os.Rename(files, t.dir); err != nil {
				os.RemoveAll(t.state)
				m.budgetOf(src.key.pdir).Add(-taken)
				return stateError("could not create the fork", err)
			}
		}
		m.recheckPackages(t, false) // the packages the fork's lock shares cost the source less
		return nil
	})
	if err != nil {
		return "", err
	}
	return newID, nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
