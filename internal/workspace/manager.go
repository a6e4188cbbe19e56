// Package workspace keeps the workspaces of execd: a client-named (or
// generated) id, scoped by principal, that owns a directory of files and one
// interpreter per language whose state lives from call to call — in memory
// while the workspace is in use, in an image on disk while it hibernates.
//
// Concurrency contract: a Manager is safe for concurrent use; calls to one
// workspace run one at a time in arrival order, calls to different workspaces
// run in parallel up to Config.MaxConcurrentRuns.
package workspace

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"execd/internal/worker"
)

// Config sets the Manager's limits. Zero values are documented per field.
type Config struct {
	// DataDir is the root of all workspace directories and images (the
	// layout is in store.go), created 0700. Required.
	DataDir string
	// HibernateAfter saves an idle workspace's interpreters to disk and
	// closes them once it has been idle this long; its next call restores
	// them. Zero means never.
	HibernateAfter time.Duration
	// IdleTTL drops a workspace's interpreter state, live or saved, once it
	// has been idle this long; files stay, and the next call says reset
	// (ReasonIdleTTL). Zero means never.
	IdleTTL time.Duration
	// MaxWorkspaces caps live interpreters (runners, one per workspace and
	// language). Making one beyond the cap first hibernates the least
	// recently used idle workspaces (an interpreter that cannot be saved is
	// dropped: ReasonEvicted); a running workspace is never touched, so the
	// cap can be exceeded while every live one is busy. Zero means
	// unlimited.
	MaxWorkspaces int
	// MaxDiskMiB is the per-workspace disk quota. Zero means unlimited.
	MaxDiskMiB int
	// MaxConcurrentRuns caps runs in flight across all workspaces; further
	// runs wait (they are never rejected). Zero means runtime.NumCPU().
	MaxConcurrentRuns int
	// MaxRunsPerPrincipal caps the runs one principal has in flight. A
	// principal with no run in flight is let in whatever the caps, so that
	// one principal's endless loops never lock the others out. Zero means
	// MaxConcurrentRuns.
	MaxRunsPerPrincipal int
	// MemoryBudget bounds the memory of the live interpreters together:
	// beyond it, idle workspaces are hibernated, least recently used first,
	// after each run and on Reclaim. Zero means no budget.
	MemoryBudget int64
	// Observer watches calls and workspaces (observe.go). Nil means
	// nothing is observed.
	Observer Observer
	// NewID mints the id of a workspace a call creates (Request.Workspace
	// empty); it must return a valid id (ValidateID). Nil means a random
	// UUIDv4. Several execd behind one balancer mint ids that route back to
	// the instance that made them (cmd/execd).
	NewID func() string
	// Network gives each run the network of its principal and workspace
	// (internal/egress's Session). Nil: runs have none.
	Network func(principal, workspace string) worker.Network
}

// Request is one call to run code.
type Request struct {
	Principal string
	Workspace string // empty: a new workspace with a UUIDv4 id
	Language  string // a language of the Factory or an alias ("js", "py")
	Code      string
	Sink      ProgressSink // may be nil
	// Input answers the code's input(); nil: nobody can answer. While the
	// code waits for it the run gives its run slot back (it keeps the
	// workspace's turn).
	Input InputSource
	// Timeout bounds the run itself, not the wait for the workspace's
	// earlier calls or for a run slot, nor the code's waits for Input.
	// Zero means none.
	Timeout time.Duration
}

// Outcome is what Run produced.
type Outcome struct {
	Workspace string // the id used (generated when Request.Workspace was empty)
	// Result is the run's result with Status and Reset as the workspace
	// decided them: Reset when the interpreter's earlier state is gone
	// (Status reset when the code itself ran fine).
	Result Result
	// ResetReason says why, when Result.Reset; empty otherwise.
	ResetReason ResetReason
	// Restored reports that the run began on an interpreter restored from
	// disk (after hibernation, a restart, a checkpoint's restore or a fork).
	Restored bool
	// BudgetExceeded reports that the daemon-wide memory budget refused the
	// guest memory during the run: an out of memory may be the daemon's, and
	// idle workspaces were hibernated to make room for a retry.
	BudgetExceeded bool
	// DiskFull reports that writes to /workspace failed during the run
	// because the workspace's disk quota, DiskQuotaBytes, is used up.
	DiskFull       bool
	DiskQuotaBytes int64
	// Files are the regular files under /workspace the run created or
	// changed, in the order first changed, at most MaxTouched;
	// FilesTruncated reports that it changed more.
	Files          []FileInfo
	FilesTruncated bool
}

// key names a workspace: its principal's directory name (principalDir,
// one-to-one with principals) and its id, so that what is found on disk
// maps to the same key as what a call names.
type key struct{ pdir, id string }

// ws is one workspace known in memory. A record exists while it has live
// runners or calls holding or awaiting its turn; otherwise it is dropped and
// the workspace lives on disk only (its files and state directory). Fields
// are guarded by Manager.mu; the files and the state directory are changed
// only by the holder of the turn.
type ws struct {
	key   key
	dir   string // the files
	state string // the state directory (images, notes, checkpoints)

	refs    int        // calls that hold a pointer to this record
	busy    bool       // a call (or hibernation) holds the turn
	waiters *list.List // of *waiter, FIFO
	running bool       // a Runner.Run is in progress

	ready    bool              // the directories were checked by a turn holder
	runners  map[string]Runner // live interpreters by language
	mem      map[string]int64  // their memory after their last run
	disk     Disk              // nil until a turn opens it (prepare)
	idleRoot *list.Element     // in Manager.idleRoots while idle with its root open
	lastUsed time.Time
}

type waiter struct {
	ready  chan struct{}
	handed bool // the turn was handed to this waiter
}

// Manager owns the workspaces of the process.
type Manager struct {
	cfg   Config
	f     Factory
	langs languages
	log   *zap.Logger
	slots *runSlots
	start time.Time
	obs   Observer

	mu     sync.Mutex
	wss    map[key]*ws
	recent map[string][]FileInfo // by principal directory: files changed lately, newest first
	live   int                   // live runners
	memory int64                 // the sum of every ws.mem: see setMemLocked
	// idleRoots are the idle workspaces whose file system keeps its root
	// open, most recently used first, at most IdleRootsKept.
	idleRoots *list.List
	closed    bool
	draining  bool
	drained   chan struct{} // closed by Drain
	active    int           // calls (and hibernations) holding a turn
	idle      chan struct{} // closed once closed && active == 0

	fds fdWatch

	stop        chan struct{}
	janitorDone chan struct{}
	sweepDone   chan struct{}
	overLimit   chan struct{} // a turn ended above a limit: the shedder hibernates
	shedMu      sync.Mutex    // held by shed
	shedDone    chan struct{}
	closeOnce   sync.Once
	drainOnce   sync.Once
}

// NewManager creates the data directory and starts the janitor (which
// trims idle interpreters, and hibernates and expires them when
// HibernateAfter or IdleTTL is set) and a sweep of what interrupted writes
// left on disk. Nothing on disk is read at start: workspaces and their
// images are found when used. Close the Manager to stop it.
func NewManager(cfg Config, f Factory, log *zap.Logger) (*Manager, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("workspace: DataDir is required")
	}
	if f == nil {
		return nil, errors.New("workspace: nil Factory")
	}
	if cfg.MaxWorkspaces < 0 || cfg.MaxDiskMiB < 0 || cfg.MaxConcurrentRuns < 0 || cfg.MaxRunsPerPrincipal < 0 ||
		cfg.IdleTTL < 0 || cfg.HibernateAfter < 0 || cfg.MemoryBudget < 0 {
		return nil, errors.New("workspace: limits must not be negative")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: data dir: %w", err)
	}
	for _, l := range f.Languages() {
		if !safeLanguage(l) {
			return nil, fmt.Errorf("workspace: language name %q is not a safe file name", l)
		}
	}
	m := &Manager{
		cfg:         cfg,
		f:           f,
		langs:       newLanguages(f.Languages()),
		log:         log,
		slots:       newRunSlots(cfg.MaxConcurrentRuns, cfg.MaxRunsPerPrincipal),
		start:       time.Now(),
		obs:         cfg.Observer,
		wss:         map[key]*ws{},
		idleRoots:   list.New(),
		recent:      map[string][]FileInfo{},
		drained:     make(chan struct{}),
		idle:        make(chan struct{}),
		stop:        make(chan struct{}),
		janitorDone: make(chan struct{}),
		sweepDone:   make(chan struct{}),
		overLimit:   make(chan struct{}, 1),
		shedDone:    make(chan struct{}),
	}
	m.fds.log = log
	if m.obs == nil {
		m.obs = nopObserver{}
	}
	if m.cfg.NewID == nil {
		m.cfg.NewID = uuid.NewString
	}
	go m.janitor()
	go m.shedder()
	go func() {
		defer close(m.sweepDone)
		// File times come from a coarse clock: only what is clearly older
		// than this Manager is another process's leftover.
		if n := sweepTemps(cfg.DataDir, m.start.Add(-time.Second)); n > 0 {
			log.Info("removed what interrupted writes left", zap.Int("entries", n))
		}
	}()
	return m, nil
}

// Languages lists the languages the Manager can run.
func (m *Manager) Languages() []string { return m.langs.offered() }

// NewID mints a new workspace id: the one minter of ids for workspaces a
// call creates (Run without Request.Workspace, Fork without newID, and a
// caller that must name a run before it starts).
func (m *Manager) NewID() string { return m.cfg.NewID() }

// ref finds or makes the record of (principal, id) and takes a reference.
func (m *Manager) ref(principal, id string, run bool) (*ws, error) {
	pdir, err := principalDir(principal)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.draining {
		return nil, closedError(run)
	}
	return m.refLocked(key{pdir, id}), nil
}

// refLocked finds or makes the record of k and takes a reference.
func (m *Manager) refLocked(k key) *ws {
	w := m.wss[k]
	if w == nil {
		pdir := filepath.Join(m.cfg.DataDir, k.pdir)
		w = &ws{key: k, dir: filepath.Join(pdir, k.id), state: filepath.Join(pdir, stateDirName, k.id),
			waiters: list.New(), runners: map[string]Runner{}, mem: map[string]int64{}}
		m.wss[k] = w
	}
	w.refs++
	return w
}

// closedError is what calls get once the Manager drains or is closed.
func closedError(run bool) *Error {
	if run {
		return ErrClosed
	}
	return &Error{Code: Closed, Msg: "execd is shutting down; nothing was changed"}
}

// unref drops a reference and forgets the record when nothing needs it.
func (m *Manager) unref(w *ws) {
	m.mu.Lock()
	w.refs--
	disk := m.maybeDropLocked(w)
	m.mu.Unlock()
	closeDisk(disk)
}

// maybeDropLocked forgets an unreferenced record without runners and returns
// its file system for the caller to close outside the lock.
func (m *Manager) maybeDropLocked(w *ws) Disk {
	if w.refs > 0 || w.busy || len(w.runners) > 0 {
		return nil
	}
	if m.wss[w.key] == w {
		delete(m.wss, w.key)
	}
	m.forgetRootLocked(w)
	disk := w.disk
	w.disk = nil
	return disk
}

func closeDisk(disk Disk) {
	if disk != nil {
		disk.Close()
	}
}

// queued reports the first wait of one call through its sink.
type queued struct {
	sink ProgressSink
	done bool
}

func (q *queued) report(msg string) {
	if q.done || q.sink == nil {
		return
	}
	q.done = true
	q.sink.Progress(0, 0, "queued: "+msg)
}

// acquireTurn waits, FIFO, until w is free, ctx ends or the Manager drains.
// A waiter that gives up leaves the queue at once.
func (m *Manager) acquireTurn(ctx context.Context, w *ws, q *queued, run bool) error {
	m.mu.Lock()
	if !w.busy {
		m.takeTurnLocked(w)
		m.mu.Unlock()
		return nil
	}
	wt := &waiter{ready: make(chan struct{})}
	e := w.waiters.PushBack(wt)
	ahead := w.waiters.Len()
	m.mu.Unlock()

	q.report(fmt.Sprintf("workspace %s is busy with another call (%d ahead)", w.key.id, ahead))
	var err error
	select {
	case <-wt.ready:
		m.mu.Lock()
		draining := m.draining
		m.mu.Unlock()
		if !draining {
			return nil
		}
		m.releaseTurn(w)
		return closedError(run)
	case <-ctx.Done():
		err = ctx.Err()
	case <-m.drained:
		err = closedError(run)
	}
	m.mu.Lock()
	if wt.handed { // lost the race: the turn is ours, pass it on
		m.mu.Unlock()
		m.releaseTurn(w)
	} else {
		w.waiters.Remove(e)
		m.mu.Unlock()
	}
	return err
}

// tryTurnLocked takes w's turn if it is free, for work of the Manager's own
// (hibernation, expiry). Callers hold m.mu and release with releaseTurn.
func (m *Manager) tryTurnLocked(w *ws) bool {
	if w.busy {
		return false
	}
	m.takeTurnLocked(w)
	return true
}

// takeTurnLocked marks w busy; m.mu is held.
func (m *Manager) takeTurnLocked(w *ws) {
	w.busy = true
	m.active++
	m.forgetRootLocked(w)
}

// IdleRootsKept is how many idle workspaces keep the descriptor their file
// system resolves paths through: a workspace in use again soon starts its
// turn without opening its directory, and the idle ones of a daemon with
// thousands of workspaces hold no more than this many descriptors.
const IdleRootsKept = 64

// keepRootLocked lets w, now idle, keep its root open; beyond IdleRootsKept
// the least recently used idle workspace's root is closed. m.mu is held,
// so no turn can begin on that workspace while its root closes.
func (m *Manager) keepRootLocked(w *ws) {
	m.forgetRootLocked(w)
	w.idleRoot = m.idleRoots.PushFront(w)
	for m.idleRoots.Len() > IdleRootsKept {
		old := m.idleRoots.Remove(m.idleRoots.Back()).(*ws)
		old.idleRoot = nil
		if old.disk != nil {
			old.disk.Release()
		}
	}
}

// forgetRootLocked takes w out of idleRoots (its root stays as it is);
// m.mu is held.
func (m *Manager) forgetRootLocked(w *ws) {
	if w.idleRoot != nil {
		m.idleRoots.Remove(w.idleRoot)
		w.idleRoot = nil
	}
}

// releaseTurn hands the turn to the next waiter or frees the workspace; a
// workspace left free keeps its root open while it is among the
// IdleRootsKept most recently used (keepRootLocked).
func (m *Manager) releaseTurn(w *ws) {
	m.mu.Lock()
	if e := w.waiters.Front(); e != nil {
		wt := w.waiters.Remove(e).(*waiter)
		wt.handed = true
		close(wt.ready)
		m.mu.Unlock()
		return // active count carries over to the next holder
	}
	w.busy = false
	m.active--
	m.signalIdleLocked()
	over := m.overLimitLocked()
	if w.disk != nil {
		m.keepRootLocked(w)
	}
	m.mu.Unlock()
	if over {
		select {
		case m.overLimit <- struct{}{}:
		default: // the shedder has been told already
		}
	}
}

func (m *Manager) signalIdleLocked() {
	if m.closed && m.active == 0 {
		select {
		case <-m.idle:
		default:
			close(m.idle)
		}
	}
}

// Run runs req.Code in the workspace, creating the workspace (and its
// directory) if needed and restoring its interpreter from disk if it
// hibernates. It waits, cancellably, for the workspace's earlier calls and
// for a run slot, reporting "queued" through req.Sink when it has to. The
// Outcome says whether earlier state was lost and why. Errors are *Error,
// or ctx's error when ctx ended while waiting (then nothing ran).
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
	slot := &heldSlot{slots: m.slots, principal: w.key.pdir, held: true, in: req.Input}
	defer slot.end()

	disk, err := m.prepare(w)
	if err != nil {
		return err
	}
	r, start, err := m.open(ctx, w, lang, req.Sink)
	if err != nil {
		return err
	}
	refused := disk.Refused()
	m.mu.Lock()
	w.running = true
	w.lastUsed = time.Now()
	m.mu.Unlock()

	opts := worker.RunOptions{Sink: req.Sink, Timeout: req.Timeout}
	if m.cfg.Network != nil {
		opts.Network = m.cfg.Network(req.Principal, w.key.id)
	}
	if req.Input != nil {
		opts.Input = slot
	}
	disk.Track()
	endRun := m.obs.Phase(ctx, PhaseRun, lang)
	res := r.Run(ctx, req.Code, opts)
	out.Files, out.FilesTruncated = m.changedFiles(w, disk)
	out.Result, out.ResetReason = m.settle(w, lang, r, start, res)
	endRun(string(out.Result.Status))
	out.BudgetExceeded = res.BudgetExceeded
	out.Restored = start.restored

	if disk.Refused() > refused {
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

	mu   sync.Mutex
	held bool
	done bool // the run is over: the slot is not taken again
}

func (h *heldSlot) Input(ctx context.Context, prompt string) worker.InputAnswer {
	h.release()
	ans := workerInput{h.in}.Input(ctx, prompt)
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
		if err := prepareDirs(w.dir, w.state, m.langs.offered()); err != nil {
			if e := m.fds.check(err); e != nil {
				return nil, e
			}
			m.log.Error("workspace directory", zap.String("workspace", w.key.id), zap.Error(err))
			return nil, &Error{Code: StartFailed, Msg: "could not create the workspace's directory", Err: err}
		}
		m.mu.Lock()
		w.ready = true
		m.mu.Unlock()
	}
	if disk == nil {
		var err error
		if disk, err = openDisk(w.dir, m.cfg.diskQuota()); err != nil {
			if e := m.fds.check(err); e != nil {
				return nil, e
			}
			return nil, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
		}
		m.mu.Lock()
		w.disk = disk
		m.mu.Unlock()
	}
	if err := disk.Acquire(); err != nil {
		if e := m.fds.check(err); e != nil {
			return nil, e
		}
		return nil, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
	}
	return disk, nil
}

// prepareDirs makes the files directory and the state directory (0700) of
// a workspace if missing. A files directory without a state directory is a
// workspace of an execd that kept no images: its interpreters' state was
// lost with that process, and every language's note says so.
func prepareDirs(dir, state string, langs []string) error {
	// A new workspace is the common case: its two mkdirs are all it costs.
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) { // the principal's first workspace
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		if os.Mkdir(state, 0o700) == nil {
			return nil
		}
		return os.MkdirAll(state, 0o700) // the principal's first, or a state path that is not a directory
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	_, err = os.Stat(state)
	stateExists := err == nil
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !stateExists:
		if err := os.MkdirAll(state, 0o700); err != nil {
			return err
		}
		for _, l := range langs {
			if err := writeNote(state, l, note(ReasonRestarted)); err != nil {
				return err
			}
		}
		return nil
	}
	return os.MkdirAll(state, 0o700)
}

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
	m.makeRoom(1)

	var st start
	n := readNote(w.state, lang)
	switch {
	case n.hasImage():
		var err error
		r, err = m.withRoom(func() (Runner, error) { return m.restoreImage(ctx, w.state, lang, disk, n == noteClone) })
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
	if err := writeNote(w.state, lang, noteLive); err != nil {
		m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
	}
	if err := ignoreMissing(os.Remove(imagePath(w.state, lang))); err != nil {
		m.log.Error("remove image", zap.String("workspace", w.key.id), zap.Error(err))
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

// restoreImage reads lang's image and restores a runner from it.
func (m *Manager) restoreImage(ctx context.Context, state, lang string, disk Disk, clone bool) (Runner, error) {
	img, err := readImage(m.f, state, lang)
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
		os.Remove(imagePath(w.state, lang))
		if err := writeNote(w.state, lang, why); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Error("workspace state note", zap.String("workspace", w.key.id), zap.Error(err))
		}
	}
}

// withTurn runs op holding the turn of an existing workspace: one known in
// memory with runners, or with a directory on disk.
func (m *Manager) withTurn(ctx context.Context, principal, id string, op func(w *ws) error) error {
	return m.turn(ctx, principal, id, true, op)
}

// turn runs op holding the turn of the workspace; with mustExist, only of
// an existing one (NotFound otherwise).
func (m *Manager) turn(ctx context.Context, principal, id string, mustExist bool, op func(w *ws) error) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	w, err := m.ref(principal, id, false)
	if err != nil {
		return err
	}
	defer m.unref(w)
	if err := m.acquireTurn(ctx, w, &queued{}, false); err != nil {
		return err
	}
	defer m.releaseTurn(w)
	m.mu.Lock()
	hasRunners := len(w.runners) > 0
	m.mu.Unlock()
	if mustExist && !hasRunners {
		if st, err := os.Stat(w.dir); err != nil || !st.IsDir() {
			return &Error{Code: NotFound, Msg: fmt.Sprintf("workspace %q does not exist", id)}
		}
	}
	return op(w)
}

// Reset drops the workspace's interpreter state, live or saved; with files
// it also empties its directory. Checkpoints are kept. It waits for the
// workspace's earlier calls. The next run starts fresh and says so
// (ReasonResetByUser).
func (m *Manager) Reset(ctx context.Context, principal, id string, files bool) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		if err := prepareDirs(w.dir, w.state, m.langs.offered()); err != nil {
			return &Error{Code: StartFailed, Msg: "could not reset the workspace", Err: err}
		}
		m.dropState(w, note(ReasonResetByUser))
		if !files {
			return nil
		}
		m.forgetDisk(w)
		m.forgetRecent(w.key)
		if err := os.RemoveAll(w.dir); err != nil {
			return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
		}
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return &Error{Code: StartFailed, Msg: "could not recreate the workspace's directory", Err: err}
		}
		return nil
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
		// The state goes first: files without state read as a workspace
		// whose state was lost, state without files would come back.
		if err := os.RemoveAll(w.state); err != nil {
			return &Error{Code: StartFailed, Msg: "could not delete the workspace's saved state", Err: err}
		}
		if err := os.RemoveAll(w.dir); err != nil {
			return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
		}
		return nil
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
	return ctx.Err()
}

// fdWatch counts and logs failures to open files because the process is out
// of file descriptors, and turns them into an error the client can read.
type fdWatch struct {
	log     *zap.Logger
	count   atomic.Int64
	last    atomic.Int64 // unix nanoseconds of the last one
	lastLog atomic.Int64
}

// check returns an *Error (code Exhausted) when err is descriptor
// exhaustion, nil otherwise.
func (f *fdWatch) check(err error) *Error {
	if !fdExhausted(err) {
		return nil
	}
	n := f.count.Add(1)
	now := time.Now().UnixNano()
	f.last.Store(now)
	if prev := f.lastLog.Load(); now-prev > int64(10*time.Second) && f.lastLog.CompareAndSwap(prev, now) {
		f.log.Error("out of file descriptors: calls are refused (raise the process limit, ulimit -n / LimitNOFILE)",
			zap.Int64("refusals", n), zap.Error(err))
	}
	return &Error{Code: Exhausted, Err: err,
		Msg: "execd has run out of file descriptors (the process limit); the code did not run. Try again shortly; if it persists, the operator must raise the limit (ulimit -n)."}
}

// fdExhausted reports whether err means the process or the system is out
// of file descriptors.
func fdExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Health is the Manager's view of its own condition, for health checks
// and metrics.
type Health struct {
	// FDExhaustions counts calls refused because the process was out of
	// file descriptors; LastFDExhaustion is when the last one was.
	FDExhaustions    int64
	LastFDExhaustion time.Time
	// Live counts live interpreters; MemoryBytes is what they hold.
	Live        int
	MemoryBytes int64
	// RunsInFlight counts the run slots taken now; RunSlots is their
	// number (Config.MaxConcurrentRuns, or its default).
	RunsInFlight, RunSlots int
}

// Health reports the Manager's condition.
func (m *Manager) Health() Health {
	h := Health{FDExhaustions: m.fds.count.Load()}
	if t := m.fds.last.Load(); t != 0 {
		h.LastFDExhaustion = time.Unix(0, t)
	}
	m.mu.Lock()
	h.Live = m.live
	h.MemoryBytes = m.memoryLocked()
	m.mu.Unlock()
	h.RunsInFlight, h.RunSlots = m.slots.inUse()
	return h
}

// memoryLocked is the memory of every live interpreter; m.mu is held. It
// is kept as a sum, not added up: every turn's end asks for it.
func (m *Manager) memoryLocked() int64 { return m.memory }

// setMemLocked records the memory of w's interpreter of lang and keeps the
// sum; m.mu is held.
func (m *Manager) setMemLocked(w *ws, lang string, b int64) {
	m.memory += b - w.mem[lang]
	w.mem[lang] = b
}

// forgetMemLocked drops w's interpreter of lang from the sum; m.mu is held.
func (m *Manager) forgetMemLocked(w *ws, lang string) {
	m.memory -= w.mem[lang]
	delete(w.mem, lang)
}
