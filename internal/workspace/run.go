package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/worker"
)

// Run runs req.Code in the workspace, creating the workspace if needed
// and restoring its interpreter from disk if it hibernates. It waits,
// cancellably, for the workspace's earlier calls and for a run slot,
// reporting "queued" through req.Sink when it has to. The Outcome says
// whether earlier state was lost and why. Errors are *Error, or ctx's
// error when ctx ended while waiting (then nothing ran).
func (m *Manager) Run(ctx context.Context, req Request) (Outcome, error) {
	id := req.Workspace
	if id == "" {
		id = m.cfg.NewID()
	} else if err := ValidateID(id); err != nil {
		return Outcome{Workspace: id}, err
	}
	out := Outcome{Workspace: id}
	lang, err := m.langs.resolve(req.Language)
	if err != nil {
		return out, err
	}
	w, err := m.ref(req.Principal, id, true)
	if err != nil {
		return out, err
	}
	defer m.unref(w)
	err = m.runTurn(ctx, w, lang, req, &out)
	m.fitMemory()
	if out.BudgetExceeded {
		// Room for the retry: half of what is idle, least recently used first.
		m.Reclaim(m.Health().MemoryBytes / 2)
	}
	return out, err
}

func (m *Manager) runTurn(ctx context.Context, w *ws, lang string, req Request, out *Outcome) error {
	q := &queued{sink: req.Sink}
	endQueue := m.obs.Phase(ctx, PhaseQueue, lang)
	err := m.acquireTurn(ctx, w, q, true)
	endQueue(waitOutcome(err))
	if err != nil {
		return err
	}
	defer m.releaseTurn(w)
	endSlot := m.obs.Phase(ctx, PhaseSlot, lang)
	err = m.slots.acquire(ctx, w.key.pdir, q, m.drained)
	endSlot(waitOutcome(err))
	if err != nil {
		return err
	}
	slot := &heldSlot{slots: m.slots, principal: w.key.pdir, held: true, in: req.Input, asking: func(a bool) { m.setAsking(w, a) }}
	defer slot.end()

	disk, err := m.prepare(w)
	if err != nil {
		return err
	}
	r, start, err := m.open(ctx, w, lang, req.Sink)
	if err != nil {
		return err
	}
	refused, byBudget := disk.Refused(), disk.BudgetRefused()
	m.mu.Lock()
	w.running = true
	w.lastUsed = time.Now()
	m.mu.Unlock()

	opts := worker.RunOptions{Sink: req.Sink, Timeout: req.Timeout}
	if req.Tools != nil {
		opts.Tools = req.Tools
	}
	if m.cfg.Network != nil {
		opts.Network = m.cfg.Network(req.Principal, w.key.id)
	}
	if req.Input != nil {
		opts.Input = slot
	}
	if m.cfg.Packages != nil {
		opts.Packages = &pkgRun{m: m, w: w, disk: disk, lang: lang}
	}
	disk.Track()
	endRun := m.obs.Phase(ctx, PhaseRun, lang)
	res := r.Run(ctx, req.Code, opts)
	out.Files, out.FilesTruncated = m.changedFiles(w, disk)
	out.Result, out.ResetReason = m.settle(w, lang, r, start, res)
	endRun(string(out.Result.Status))
	out.BudgetExceeded = res.BudgetExceeded
	out.Restored = start.restored

	switch {
	case disk.BudgetRefused() > byBudget:
		out.PrincipalDiskFull = true
		out.PrincipalDiskBytes = int64(m.cfg.MaxPrincipalDiskMiB) << 20
	case disk.Refused() > refused:
		out.DiskFull = true
		out.DiskQuotaBytes = m.cfg.diskQuota()
	}
	m.mu.Lock()
	w.running = false
	w.lastUsed = time.Now()
	m.mu.Unlock()
	return nil
}

// heldSlot is a run's slot, given back while the code waits for input:
// a person answering a question must not keep other workspaces from
// running. It is the run's InputSource, wrapping the caller's.
type heldSlot struct {
	slots     *runSlots
	principal string
	in        InputSource
	asking    func(bool) // notes the wait on the workspace (Manager.setAsking)

	mu   sync.Mutex
	held bool
	done bool // the run is over: the slot is not taken again
}

func (h *heldSlot) Input(ctx context.Context, prompt string) worker.InputAnswer {
	h.release()
	h.asking(true)
	ans := workerInput{h.in}.Input(ctx, prompt)
	h.asking(false)
	if ctx.Err() != nil {
		return ans // the run is being stopped: it ends without its slot
	}
	// A draining daemon still lets a running call go on: no drained.
	if h.slots.acquire(ctx, h.principal, &queued{}, nil) == nil {
		h.mu.Lock()
		if h.done {
			h.mu.Unlock()
			h.slots.release(h.principal)
			return ans
		}
		h.held = true
		h.mu.Unlock()
	}
	return ans
}

func (h *heldSlot) release() {
	h.mu.Lock()
	held := h.held
	h.held = false
	h.mu.Unlock()
	if held {
		h.slots.release(h.principal)
	}
}

// end gives the slot back at the end of the run, for good.
func (h *heldSlot) end() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	h.release()
}

// prepare makes sure the workspace's directories exist and its Disk is
// open, and returns it. The caller holds w's turn.
func (m *Manager) prepare(w *ws) (Disk, error) {
	m.mu.Lock()
	ready, disk := w.ready, w.disk
	m.mu.Unlock()
	if !ready {
		err := m.admitWorkspace(w, func() error {
			if err := checkDirs(w.dir, w.state, m.langs.offered()); err != nil {
				return err
			}
			m.mu.Lock()
			w.ready = true
			m.mu.Unlock()
			return nil
		})
		var refused *Error
		if errors.As(err, &refused) {
			return nil, refused
		}
		if err != nil {
			if e := m.fds.check(err); e != nil {
				return nil, e
			}
			m.log.Error("workspace directory", zap.String("workspace", w.key.id), zap.Error(err))
			return nil, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
		}
	}
	if disk == nil {
		var err error
		if disk, err = m.openCharged(w); err != nil {
			if e := m.fds.check(err); e != nil {
				return nil, e
			}
			return nil, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
		}
	}
	if err := disk.Acquire(); err != nil {
		if e := m.fds.check(err); e != nil {
			return nil, e
		}
		return nil, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
	}
	return disk, nil
}

// checkDirs checks the directories of a workspace a turn is about to use,
// and makes none but the principal's state root: a workspace's files
// directory is made when something is first written in it (makeFilesDir),
// its state directory when something is first saved or noted in it, so a
// new workspace costs no mkdir at all (RATIONALE.md, "Why is a
// workspace's files directory made only when it is written?"); its
// interpreters are marked live in the journal (journal.go). A path of
// either that is not a directory is damage. A principal directory without
// a state root is an older execd's (stateRoot).
func checkDirs(dir, state string, langs []string) error {
	for _, p := range []string{dir, state} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return fmt.Errorf("%s is not a directory", p)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if !exists(filepath.Dir(dir)) {
		return nil // the principal's first workspace: nothing to make yet
	}
	return stateRoot(filepath.Dir(dir), filepath.Dir(state), langs)
}

// makeFilesDir makes the files directory of a workspace (0700), from one
// of the spares when one is ready (spares.go), and the principal's state
// root before it (stateRoot). It finds a directory made already; the
// workspace's Disk calls it before the first change (guestfs.NewLazy).
func makeFilesDir(spares *spareDirs, dir, state string, langs []string) error {
	if err := stateRoot(filepath.Dir(dir), filepath.Dir(state), langs); err != nil {
		return err
	}
	err := spares.mkdir(dir)
	if errors.Is(err, fs.ErrExist) && isDir(dir) {
		return nil
	}
	return err
}

// stateRootMu serialises stateRoot: a workspace's files directory is made
// only once its principal's state root exists, so the pass over an older
// execd's workspaces (olderExecd) never takes a new one for one of them.
var stateRootMu sync.Mutex

// stateRoot makes the principal's state root, root (<principal>/~state),
// unless it exists. A principal directory, pdir, that exists without one
// is of an execd that kept no images: every workspace in it gets the note
// that its interpreters' state was lost with that process (olderExecd).
func stateRoot(pdir, root string, langs []string) error {
	if isDir(root) {
		return nil
	}
	stateRootMu.Lock()
	defer stateRootMu.Unlock()
	if _, err := os.Stat(root); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, err := os.Stat(pdir); err == nil {
		return olderExecd(pdir, root, langs)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.MkdirAll(root, 0o700)
}

// mkdirState makes dir, a workspace's state directory or a directory in
// it, when it is first needed, with the parents it lacks. A principal
// directory is only ever made under stateRootMu, together with its state
// root: stateRoot, which holds it, must never find one made and its state
// root not yet, which it would take for an older execd's (olderExecd) and
// mark every workspace in it restarted, or fail on renaming its notes into
// place. Only a missing parent takes the lock; a directory made already
// is no error.
func mkdirState(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		stateRootMu.Lock()
		defer stateRootMu.Unlock()
		return os.MkdirAll(dir, 0o700)
	}
	if errors.Is(err, fs.ErrExist) && isDir(dir) {
		return nil
	}
	return err
}

// olderExecd marks every workspace of a principal directory of an execd
// that kept no images (no state root): each language's state was lost
// with that process (ReasonRestarted). The notes are written in a
// temporary root renamed into place at the end, so that an interrupted
// pass leaves no state root and is done again (sweepTemps removes what
// it wrote).
func olderExecd(pdir, root string, langs []string) error {
	ents, err := os.ReadDir(pdir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(pdir, tmpPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // nothing left there once renamed
	for _, e := range ents {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		state := filepath.Join(tmp, e.Name())
		if err := os.Mkdir(state, 0o700); err != nil { // not mkdirState: stateRootMu is held
			return err
		}
		for _, l := range langs {
			if err := writeNote(state, l, note(ReasonRestarted)); err != nil {
				return err
			}
		}
	}
	return os.Rename(tmp, root)
}
