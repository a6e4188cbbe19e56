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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"execd/internal/packages"
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
	// MaxPrincipalDiskMiB bounds everything one principal holds on disk:
	// its workspaces' files, saved interpreters, checkpoints and forks,
	// data shared by hard links counted once (principal.go). Zero means
	// unlimited (and nothing is counted).
	MaxPrincipalDiskMiB int
	// MaxWorkspacesPerPrincipal caps the workspaces (directories) one
	// principal has; a call, write or fork that would make one more is
	// refused (LimitReached). Zero means unlimited.
	MaxWorkspacesPerPrincipal int
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
	// MaxMemoryPerPrincipal bounds the memory one principal's live
	// interpreters hold together, busy ones (running, or waiting for
	// input) included: beyond it the principal's own idle workspaces are
	// hibernated, and when none is left its next interpreter is refused
	// (LimitReached). Zero means no share beyond the budget.
	MaxMemoryPerPrincipal int64
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
	// Packages installs npm packages and pure-Python wheels into
	// workspaces (packages.go). Nil: there are none, and a guest that asks
	// is told so.
	Packages *packages.Service
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
	// Tools are the upstream MCP servers' tools the code may call (code
	// mode: internal/upstream's Run, one per run). Nil: none.
	Tools Tools
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
	// PrincipalDiskFull reports that writes failed because the
	// principal's disk budget, PrincipalDiskBytes, is used up
	// (Config.MaxPrincipalDiskMiB).
	PrincipalDiskFull  bool
	PrincipalDiskBytes int64
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

	refs    int           // calls that hold a pointer to this record
	busy    bool          // a call (or hibernation) holds the turn
	waiters *list.List    // of *waiter, FIFO
	running bool          // a Runner.Run is in progress
	asking  bool          // and its code waits for input (heldSlot)
	askWake chan struct{} // closed when asking becomes true; nil until wanted (askingLocked)

	ready    bool              // the directories were checked by a turn holder
	runners  map[string]Runner // live interpreters by language
	mem      map[string]int64  // their memory after their last run
	disk     Disk              // nil until a turn opens it (prepare)
	pkgSeen  uint64            // disk.Changes() when the packages ledger last looked (settlePackages)
	idleRoot *list.Element     // in Manager.idleRoots while idle with its root open
	lastUsed time.Time
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
	recent map[string][]FileInfo     // by principal directory: files changed lately, newest first
	live   int                       // live runners
	memory int64                     // the sum of every ws.mem: see setMemLocked
	disks  map[string]*principalDisk // by principal directory: see budgetOf
	// idleRoots are the idle workspaces whose file system keeps its root
	// open, most recently used first, at most IdleRootsKept.
	idleRoots *list.List
	closed    bool
	draining  bool
	drained   chan struct{} // closed by Drain
	active    int           // calls (and hibernations) holding a turn
	idle      chan struct{} // closed once closed && active == 0

	fds fdWatch
	// journal marks the interpreters that start with no note (journal.go).
	journal *journal
	// spares are empty directories, ready to be files directories (spares.go).
	spares *spareDirs

	stop        chan struct{}
	janitorDone chan struct{}
	sweepDone   chan struct{}
	overLimit   chan struct{} // a turn ended above a limit: the shedder hibernates
	shedMu      sync.Mutex    // held by shed
	shedDone    chan struct{}
	createMu    sync.Mutex // held to count a principal's workspaces and make one (admitWorkspace)
	closeOnce   sync.Once
	drainOnce   sync.Once

	// pkgs charges every workspace's packages, accepted is the
	// generation of each workspace's lock last held to its disk quota
	// (packagesdisk.go).
	pkgs     pkgLedger
	accepted acceptedLocks
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
		cfg.IdleTTL < 0 || cfg.HibernateAfter < 0 || cfg.MemoryBudget < 0 || cfg.MaxMemoryPerPrincipal < 0 ||
		cfg.MaxPrincipalDiskMiB < 0 || cfg.MaxWorkspacesPerPrincipal < 0 {
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
		disks:       map[string]*principalDisk{},
		drained:     make(chan struct{}),
		idle:        make(chan struct{}),
		stop:        make(chan struct{}),
		janitorDone: make(chan struct{}),
		sweepDone:   make(chan struct{}),
		overLimit:   make(chan struct{}, 1),
		shedDone:    make(chan struct{}),
	}
	m.fds.log = log
	m.journal = openJournal(cfg.DataDir, log)
	m.spares = newSpareDirs(cfg.DataDir, m.journal.suffix(), log)
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
