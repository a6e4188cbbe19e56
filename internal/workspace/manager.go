// Package workspace keeps the workspaces of execd: a client-named (or
// generated) id, scoped by principal, that owns a directory of files and one
// interpreter per language whose state lives from call to call.
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
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/tetratelabs/wazero/experimental/sys"
	"go.uber.org/zap"

	"execd/internal/worker"
)

// Runner is one interpreter instance; a *worker.Worker satisfies it. The
// Manager never calls Run concurrently on one Runner.
type Runner interface {
	Run(ctx context.Context, code string, sink worker.ProgressSink) worker.Result
	Close() error
}

// Factory makes Runners.
type Factory interface {
	// Languages lists the canonical names of the languages offered.
	Languages() []string
	// NewRunner makes a fresh interpreter for lang with the host directory
	// dir mounted at /workspace.
	NewRunner(ctx context.Context, lang string, dir string) (Runner, error)
}

// FSFactory is a Factory that can mount a file system the Manager provides.
// When the Factory implements it, the Manager passes each workspace's
// [QuotaFS] (confined to the workspace directory, quota
// Config.MaxDiskMiB, shared by all the workspace's runners) instead of the
// bare directory, and explains refused writes in the run's stderr.
type FSFactory interface {
	Factory
	NewRunnerFS(ctx context.Context, lang string, fsys sys.FS) (Runner, error)
}

// Config sets the Manager's limits. Zero values are documented per field.
type Config struct {
	// DataDir is the root of all workspace directories:
	// DataDir/<principal>/<id>/, created 0700. Required.
	DataDir string
	// IdleTTL closes a workspace's interpreters after it has been idle this
	// long; its files stay. Zero means never.
	IdleTTL time.Duration
	// MaxWorkspaces caps live interpreters (runners, one per workspace and
	// language). Making one beyond the cap first evicts the least recently
	// used idle workspaces; a running workspace is never evicted, so the cap
	// can be exceeded while every live one is busy. Zero means unlimited.
	MaxWorkspaces int
	// MaxDiskMiB is the per-workspace disk quota, enforced when the Factory
	// is an FSFactory. Zero means unlimited.
	MaxDiskMiB int
	// MaxConcurrentRuns caps runs in flight across all workspaces; further
	// runs wait (they are never rejected). Zero means runtime.NumCPU().
	MaxConcurrentRuns int
}

// Request is one call to run code.
type Request struct {
	Principal string
	Workspace string // empty: a new workspace with a UUIDv4 id
	Language  string // a language of the Factory or an alias ("js", "py")
	Code      string
	Sink      worker.ProgressSink // may be nil
	// Timeout bounds the run itself, not the wait for the workspace's
	// earlier calls or for a run slot. Zero means none.
	Timeout time.Duration
}

// Outcome is what Run produced.
type Outcome struct {
	Workspace string // the id used (generated when Request.Workspace was empty)
	Result    worker.Result
}

// Info describes one workspace for List.
type Info struct {
	ID        string
	Languages []string  // languages with a live interpreter, sorted
	Live      bool      // has at least one live interpreter
	Running   bool      // a call is running in it now
	LastUsed  time.Time // last call's end; the directory's mtime when not live
	DiskBytes int64     // usage as the quota counts it
}

type key struct{ principal, id string }

// ws is one workspace known in memory. A record exists while it has live
// runners or calls holding or awaiting its turn; otherwise it is dropped and
// the workspace lives on disk only. Fields are guarded by Manager.mu.
type ws struct {
	key key
	dir string

	refs    int        // calls that hold a pointer to this record
	busy    bool       // a call holds the turn
	waiters *list.List // of *waiter, FIFO
	running bool       // a Runner.Run is in progress

	prepared bool // the directory was checked/created by a turn holder
	fromDisk bool // existed on disk before this record: state was lost
	runners  map[string]Runner
	had      map[string]bool // languages that had a runner in this record's life
	fs       *QuotaFS
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
	fsf   FSFactory // f as an FSFactory, or nil
	langs languages
	log   *zap.Logger
	slots chan struct{}

	mu     sync.Mutex
	wss    map[key]*ws
	live   int // live runners
	closed bool
	active int           // calls holding a turn
	idle   chan struct{} // closed once closed && active == 0

	stop        chan struct{}
	janitorDone chan struct{}
	closeOnce   sync.Once
}

// NewManager creates the data directory and starts the idle janitor (when
// IdleTTL > 0). Close the Manager to stop it.
func NewManager(cfg Config, f Factory, log *zap.Logger) (*Manager, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("workspace: DataDir is required")
	}
	if f == nil {
		return nil, errors.New("workspace: nil Factory")
	}
	if cfg.MaxWorkspaces < 0 || cfg.MaxDiskMiB < 0 || cfg.MaxConcurrentRuns < 0 || cfg.IdleTTL < 0 {
		return nil, errors.New("workspace: limits must not be negative")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: data dir: %w", err)
	}
	n := cfg.MaxConcurrentRuns
	if n == 0 {
		n = runtime.NumCPU()
	}
	m := &Manager{
		cfg:         cfg,
		f:           f,
		langs:       newLanguages(f.Languages()),
		log:         log,
		slots:       make(chan struct{}, n),
		wss:         map[key]*ws{},
		idle:        make(chan struct{}),
		stop:        make(chan struct{}),
		janitorDone: make(chan struct{}),
	}
	m.fsf, _ = f.(FSFactory)
	if cfg.IdleTTL > 0 {
		go m.janitor()
	} else {
		close(m.janitorDone)
	}
	return m, nil
}

// Languages lists the languages the Manager can run.
func (m *Manager) Languages() []string { return m.langs.offered() }

func (m *Manager) principalPath(principal string) (string, error) {
	p, err := principalDir(principal)
	if err != nil {
		return "", err
	}
	return filepath.Join(m.cfg.DataDir, p), nil
}

// ref finds or makes the record of (principal, id) and takes a reference.
func (m *Manager) ref(principal, id string) (*ws, error) {
	pdir, err := m.principalPath(principal)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	k := key{principal, id}
	w := m.wss[k]
	if w == nil {
		w = &ws{key: k, dir: filepath.Join(pdir, id), waiters: list.New(),
			runners: map[string]Runner{}, had: map[string]bool{}}
		m.wss[k] = w
	}
	w.refs++
	return w, nil
}

// unref drops a reference and forgets the record when nothing needs it.
func (m *Manager) unref(w *ws) {
	m.mu.Lock()
	w.refs--
	fsys := m.maybeDropLocked(w)
	m.mu.Unlock()
	closeFS(fsys)
}

// maybeDropLocked forgets an unreferenced record without runners and returns
// its file system for the caller to close outside the lock.
func (m *Manager) maybeDropLocked(w *ws) *QuotaFS {
	if w.refs > 0 || w.busy || len(w.runners) > 0 {
		return nil
	}
	if m.wss[w.key] == w {
		delete(m.wss, w.key)
	}
	fsys := w.fs
	w.fs = nil
	return fsys
}

func closeFS(fsys *QuotaFS) {
	if fsys != nil {
		fsys.Close()
	}
}

// queued reports the first wait of one call through its sink.
type queued struct {
	sink worker.ProgressSink
	done bool
}

func (q *queued) report(msg string) {
	if q.done || q.sink == nil {
		return
	}
	q.done = true
	q.sink.Progress(0, 0, "queued: "+msg)
}

// acquireTurn waits, FIFO, until w is free or ctx ends. A cancelled waiter
// leaves the queue at once.
func (m *Manager) acquireTurn(ctx context.Context, w *ws, q *queued) error {
	m.mu.Lock()
	if !w.busy {
		w.busy = true
		m.active++
		m.mu.Unlock()
		return nil
	}
	wt := &waiter{ready: make(chan struct{})}
	e := w.waiters.PushBack(wt)
	ahead := w.waiters.Len()
	m.mu.Unlock()

	q.report(fmt.Sprintf("workspace %s is busy with another call (%d ahead)", w.key.id, ahead))
	select {
	case <-wt.ready:
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		if wt.handed { // lost the race: the turn is ours, pass it on
			m.mu.Unlock()
			m.releaseTurn(w)
		} else {
			w.waiters.Remove(e)
			m.mu.Unlock()
		}
		return ctx.Err()
	}
}

// releaseTurn hands the turn to the next waiter or frees the workspace.
func (m *Manager) releaseTurn(w *ws) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := w.waiters.Front(); e != nil {
		wt := w.waiters.Remove(e).(*waiter)
		wt.handed = true
		close(wt.ready)
		return // active count carries over to the next holder
	}
	w.busy = false
	m.active--
	m.signalIdleLocked()
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

// acquireSlot waits for one of the MaxConcurrentRuns run slots.
func (m *Manager) acquireSlot(ctx context.Context, q *queued) error {
	select {
	case m.slots <- struct{}{}:
		return nil
	default:
	}
	q.report(fmt.Sprintf("all %d run slots are busy; waiting for one", cap(m.slots)))
	select {
	case m.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) releaseSlot() { <-m.slots }

// Run runs req.Code in the workspace, creating the workspace (and its
// directory) if needed. It waits, cancellably, for the workspace's earlier
// calls and for a run slot, reporting "queued" through req.Sink when it has
// to. A Result from a fresh interpreter in a workspace that had state is
// marked Reset. Errors are *Error, or ctx's error when ctx ended while
// waiting (then nothing ran).
func (m *Manager) Run(ctx context.Context, req Request) (Outcome, error) {
	id := req.Workspace
	if id == "" {
		id = uuid.NewString()
	} else if err := ValidateID(id); err != nil {
		return Outcome{Workspace: id}, err
	}
	out := Outcome{Workspace: id}
	lang, err := m.langs.resolve(req.Language)
	if err != nil {
		return out, err
	}
	w, err := m.ref(req.Principal, id)
	if err != nil {
		return out, err
	}
	defer m.unref(w)

	q := &queued{sink: req.Sink}
	if err := m.acquireTurn(ctx, w, q); err != nil {
		return out, err
	}
	defer m.releaseTurn(w)
	if err := m.acquireSlot(ctx, q); err != nil {
		return out, err
	}
	defer m.releaseSlot()

	r, fresh, err := m.runner(ctx, w, lang)
	if err != nil {
		return out, err
	}
	var refused int64
	m.mu.Lock()
	w.running = true
	w.lastUsed = time.Now()
	fsys := w.fs
	m.mu.Unlock()
	if fsys != nil {
		refused = fsys.Refused()
	}

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	res := r.Run(runCtx, req.Code, req.Sink)

	if fresh {
		res.Reset = true
		if res.Status == worker.StatusOK {
			res.Status = worker.StatusReset
		}
	}
	if fsys != nil && fsys.Refused() > refused {
		res.Stderr += fmt.Sprintf("\n[execd] the workspace's disk quota (%d MiB) is full: writes to /workspace failed with an I/O error. Delete files, or reset the workspace with files: true.\n", m.cfg.MaxDiskMiB)
	}
	m.mu.Lock()
	w.running = false
	w.lastUsed = time.Now()
	closing := m.closed
	m.mu.Unlock()
	if closing {
		m.dropRunners(w, false)
	}
	out.Result = res
	return out, nil
}

// runner returns w's runner for lang, making one if needed. fresh reports a
// new runner in a workspace that had state before (evicted, killed for good,
// or from before a restart). The caller holds w's turn.
func (m *Manager) runner(ctx context.Context, w *ws, lang string) (Runner, bool, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false, ErrClosed
	}
	if r := w.runners[lang]; r != nil {
		m.mu.Unlock()
		return r, false, nil
	}
	prepared := w.prepared
	m.mu.Unlock()

	if !prepared {
		fromDisk, err := prepareDir(w.dir)
		if err != nil {
			m.log.Error("workspace directory", zap.String("workspace", w.key.id), zap.Error(err))
			return nil, false, &Error{Code: StartFailed, Msg: "could not create the workspace's directory", Err: err}
		}
		m.mu.Lock()
		w.prepared, w.fromDisk = true, fromDisk
		m.mu.Unlock()
	}

	m.makeRoom(1)

	m.mu.Lock()
	fresh := w.had[lang] || w.fromDisk
	fsys := w.fs
	m.mu.Unlock()

	var r Runner
	var err error
	if m.fsf != nil {
		if fsys == nil {
			if fsys, err = newQuotaFS(w.dir, int64(m.cfg.MaxDiskMiB)<<20); err != nil {
				return nil, false, &Error{Code: StartFailed, Msg: "could not open the workspace's directory", Err: err}
			}
			m.mu.Lock()
			w.fs = fsys
			m.mu.Unlock()
		}
		r, err = m.fsf.NewRunnerFS(ctx, lang, fsys)
	} else {
		r, err = m.f.NewRunner(ctx, lang, w.dir)
	}
	if err != nil {
		m.log.Warn("new runner", zap.String("workspace", w.key.id), zap.String("language", lang), zap.Error(err))
		return nil, false, &Error{Code: StartFailed, Msg: fmt.Sprintf("could not start a %s interpreter: %v", lang, err), Err: err}
	}
	m.mu.Lock()
	w.runners[lang] = r
	w.had[lang] = true
	m.live++
	m.mu.Unlock()
	return r, fresh, nil
}

// prepareDir makes dir (0700) if missing and reports whether it existed.
func prepareDir(dir string) (existed bool, err error) {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return false, fmt.Errorf("%s is not a directory", dir)
		}
		return true, nil
	}
	return false, os.MkdirAll(dir, 0o700)
}

// dropRunners closes w's runners (and file system) and forgets them. With
// forget, w no longer remembers it had state (explicit reset or delete).
func (m *Manager) dropRunners(w *ws, forget bool) {
	m.mu.Lock()
	rs := w.runners
	w.runners = map[string]Runner{}
	m.live -= len(rs)
	if forget {
		w.had = map[string]bool{}
	}
	fsys := w.fs
	w.fs = nil
	m.mu.Unlock()
	m.closeRunners(w.key, rs)
	closeFS(fsys)
}

func (m *Manager) closeRunners(k key, rs map[string]Runner) {
	for lang, r := range rs {
		if err := r.Close(); err != nil {
			m.log.Warn("close runner", zap.String("workspace", k.id), zap.String("language", lang), zap.Error(err))
		}
	}
}

// List returns the principal's workspaces, live ones and those on disk only,
// most recently used first.
func (m *Manager) List(principal string) []Info {
	pdir, err := m.principalPath(principal)
	if err != nil {
		return nil
	}
	infos := map[string]*Info{}
	type liveFS struct {
		id string
		fs *QuotaFS
	}
	m.mu.Lock()
	for k, w := range m.wss {
		if k.principal != principal {
			continue
		}
		if len(w.runners) == 0 && !w.busy {
			continue // a record on its way in or out; the disk says the rest
		}
		in := &Info{ID: k.id, Live: len(w.runners) > 0, Running: w.running, LastUsed: w.lastUsed, DiskBytes: -1}
		for lang := range w.runners {
			in.Languages = append(in.Languages, lang)
		}
		sort.Strings(in.Languages)
		if w.fs != nil {
			in.DiskBytes = w.fs.Used()
		}
		infos[k.id] = in
	}
	m.mu.Unlock()

	entries, _ := os.ReadDir(pdir)
	for _, e := range entries {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		in := infos[e.Name()]
		if in == nil {
			in = &Info{ID: e.Name(), DiskBytes: -1}
			if fi, err := e.Info(); err == nil {
				in.LastUsed = fi.ModTime()
			}
			infos[e.Name()] = in
		}
	}
	out := make([]Info, 0, len(infos))
	for _, in := range infos {
		if in.DiskBytes < 0 {
			in.DiskBytes, _ = diskUsage(filepath.Join(pdir, in.ID))
		}
		out = append(out, *in)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.After(out[j].LastUsed)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// withTurn runs op holding the turn of an existing workspace: one known in
// memory with runners, or with a directory on disk.
func (m *Manager) withTurn(ctx context.Context, principal, id string, op func(w *ws) error) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	w, err := m.ref(principal, id)
	if err != nil {
		return err
	}
	defer m.unref(w)
	if err := m.acquireTurn(ctx, w, &queued{}); err != nil {
		return err
	}
	defer m.releaseTurn(w)
	m.mu.Lock()
	hasRunners := len(w.runners) > 0
	m.mu.Unlock()
	if !hasRunners {
		if st, err := os.Stat(w.dir); err != nil || !st.IsDir() {
			return &Error{Code: NotFound, Msg: fmt.Sprintf("workspace %q does not exist", id)}
		}
	}
	return op(w)
}

// Reset drops the workspace's interpreter state; with files it also empties
// its directory. It waits for the workspace's earlier calls. The next run
// starts fresh (and says so).
func (m *Manager) Reset(ctx context.Context, principal, id string, files bool) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		m.dropRunners(w, false)
		if !files {
			return nil
		}
		if err := os.RemoveAll(w.dir); err != nil {
			return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
		}
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return &Error{Code: StartFailed, Msg: "could not recreate the workspace's directory", Err: err}
		}
		return nil
	})
}

// Delete closes the workspace's interpreters and removes its directory. It
// waits for the workspace's earlier calls; calls queued behind it find a new,
// empty workspace of the same id.
func (m *Manager) Delete(ctx context.Context, principal, id string) error {
	return m.withTurn(ctx, principal, id, func(w *ws) error {
		m.dropRunners(w, true)
		m.mu.Lock()
		w.prepared, w.fromDisk = false, false
		m.mu.Unlock()
		if err := os.RemoveAll(w.dir); err != nil {
			return &Error{Code: StartFailed, Msg: "could not delete the workspace's files", Err: err}
		}
		return nil
	})
}

// Close stops the janitor, refuses new calls, closes idle interpreters and
// waits for running calls to end (their interpreters are closed as they
// finish). When ctx ends first, the remaining interpreters are closed under
// the running calls and ctx's error is returned. Close is idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.signalIdleLocked()
		m.mu.Unlock()
		close(m.stop)
	})
	<-m.janitorDone
	m.evict(func(w *ws) bool { return true })

	select {
	case <-m.idle:
		// Calls that ended after the first sweep left their runners.
		m.evict(func(w *ws) bool { return true })
		return nil
	case <-ctx.Done():
		m.mu.Lock()
		var all []*ws
		for _, w := range m.wss {
			all = append(all, w)
		}
		m.mu.Unlock()
		for _, w := range all {
			m.dropRunners(w, false)
		}
		return ctx.Err()
	}
}
