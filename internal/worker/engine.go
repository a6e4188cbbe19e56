package worker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"go.uber.org/zap"

	"execd/sandbox"
)

// Config is the engine-wide sandbox configuration. Zero values mean the
// documented defaults.
type Config struct {
	// CacheDir holds wazero's on-disk compilation cache and, under
	// CacheDir/images, the base images (base.go); "" keeps both in memory
	// only (every process start compiles and builds them again).
	CacheDir string
	// MemoryLimitMiB caps each instance's linear memory; 0 means 256. The
	// interpreter's own heap limit is set below it, so running out of memory
	// is an ordinary "oom" result, not a crash. Minimum 32.
	MemoryLimitMiB int
	// TotalMemoryMiB caps the linear memory of all instances together; a
	// guest whose growth would pass it gets out of memory, and NewWorker and
	// Restore fail with ErrMemoryBudget. 0 means 3/4 of the machine's memory
	// or of the process's cgroup limit, whichever is lower
	// (DefaultTotalMemoryMiB).
	TotalMemoryMiB int
	// MaxOutputBytes caps stdout and stderr, each, per run; 0 means 64 KiB.
	// Longer output keeps its head and tail with a marker in between.
	MaxOutputBytes int
	// StrictTermination adds a kill switch to every guest (a countdown at
	// each loop head that calls the host now and then, see killswitch.go),
	// so the hard kill stops even a loop that never returns to the
	// interpreter. Without it a guest that ignores the soft interrupt is
	// abandoned (its goroutine runs on until it returns by itself).
	StrictTermination bool
	// InterruptGrace is how long a run may take to honour the soft
	// interrupt before the hard kill; 0 means 2s.
	InterruptGrace time.Duration
	// MaxImageBytes caps each image a run shows (show()); 0 means 2 MiB.
	MaxImageBytes int
	// MaxImages caps the images one run shows; 0 means 8.
	MaxImages int
	// MaxInputAnswerBytes caps an answer to input() (interact.go): a
	// longer one is refused, never cut; 0 means 4 MiB.
	MaxInputAnswerBytes int
	// PythonPreload lists the modules imported into Python's base image,
	// so that every new Python worker starts with them loaded (not bound
	// to names: the code still says `import json`). nil or empty: none.
	PythonPreload []string
	// SpareInstances is how many clones of each guest's base image are
	// kept made ahead of need, so that a new worker does not wait for one
	// to be instantiated and reseeded (spare.go); 0 means none.
	SpareInstances int
	// PackagesDir is the packages cache (internal/packages'
	// Service.CacheDir), mounted read-only at PackagesMount in every
	// instance; "" mounts an empty directory there, so that every instance
	// has the same mounts (images depend on it).
	PackagesDir string
	// Observer is told of every soft interrupt and hard kill (observe.go).
	// Nil means nothing is observed.
	Observer Observer
}

const (
	defaultMemoryLimitMiB = 256
	minMemoryLimitMiB     = 32
	minTotalMemoryMiB     = 64
	defaultMaxOutput      = 64 << 10
	defaultGrace          = 2 * time.Second
	defaultMaxImageBytes  = 2 << 20
	defaultMaxImages      = 8
	defaultMaxInputAnswer = 4 << 20
)

// pythonModule is a dotted module name, the only text PythonPreload may
// hold (it becomes code).
var pythonModule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

func (c Config) withDefaults() (Config, error) {
	if c.MemoryLimitMiB == 0 {
		c.MemoryLimitMiB = defaultMemoryLimitMiB
	}
	if c.MemoryLimitMiB < minMemoryLimitMiB || c.MemoryLimitMiB > 4095 {
		return c, fmt.Errorf("memory limit %d MiB: must be between %d and 4095", c.MemoryLimitMiB, minMemoryLimitMiB)
	}
	if c.TotalMemoryMiB == 0 {
		c.TotalMemoryMiB = DefaultTotalMemoryMiB()
	}
	if c.TotalMemoryMiB < minTotalMemoryMiB {
		return c, fmt.Errorf("total memory %d MiB: must be at least %d", c.TotalMemoryMiB, minTotalMemoryMiB)
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = defaultMaxOutput
	}
	if c.MaxOutputBytes < 0 {
		return c, fmt.Errorf("max output bytes %d: must not be negative", c.MaxOutputBytes)
	}
	if c.MaxImageBytes == 0 {
		c.MaxImageBytes = defaultMaxImageBytes
	}
	if c.MaxImages == 0 {
		c.MaxImages = defaultMaxImages
	}
	if c.MaxImageBytes < 0 || c.MaxImages < 0 {
		return c, fmt.Errorf("image limits %d bytes, %d images: must not be negative", c.MaxImageBytes, c.MaxImages)
	}
	if c.MaxInputAnswerBytes == 0 {
		c.MaxInputAnswerBytes = defaultMaxInputAnswer
	}
	if c.MaxInputAnswerBytes < 0 || c.MaxInputAnswerBytes > math.MaxInt32 {
		return c, fmt.Errorf("max input answer bytes %d: must be between 0 and %d", c.MaxInputAnswerBytes, math.MaxInt32)
	}
	if c.SpareInstances < 0 {
		return c, fmt.Errorf("spare instances %d: must not be negative", c.SpareInstances)
	}
	if c.InterruptGrace == 0 {
		c.InterruptGrace = defaultGrace
	}
	if c.InterruptGrace < 0 {
		return c, fmt.Errorf("interrupt grace %v: must not be negative", c.InterruptGrace)
	}
	for _, m := range c.PythonPreload {
		if !pythonModule.MatchString(m) {
			return c, fmt.Errorf("python preload: %q is not a module name", m)
		}
	}
	return c, nil
}

// heapLimit is the interpreter heap cap handed to execd_init: the linear
// memory cap less room for the shadow stack, libc and the result envelope.
func (c Config) heapLimit() uint32 {
	total := uint64(c.MemoryLimitMiB) << 20
	headroom := max(uint64(24)<<20, total/8)
	return uint32(total - headroom)
}

// Engine owns the wazero runtime and the compiled guests of the process.
// It is safe for concurrent use.
//
// NewEngine returns at once: each guest is compiled, and its base image
// built, in the background (see Ready). NewWorker and Restore wait for
// their guest.
type Engine struct {
	cfg    Config
	log    *zap.Logger
	rt     wazero.Runtime
	cache  wazero.CompilationCache
	guests map[string]*guest // one per language, fixed by NewEngine
	langs  []string
	budget budget
	start  time.Time // the origin of the guests' monotonic clocks
	source func(lang string) ([]byte, error)

	bg     context.Context // background work: ends with Close
	stopBg context.CancelFunc
	wg     sync.WaitGroup

	closeMu sync.Mutex
	closed  bool
	// open is held, for reading, by the work that reads an instance's
	// memory or a base image outside a guest call (a snapshot, a trim);
	// Close takes it before it frees them. See hold.
	open sync.RWMutex

	abandoned atomic.Int64 // guest calls the hard kill could not stop, still running

	spareBuild sync.Mutex   // held while a spare is built (spare.go)
	spills     atomic.Int64 // spills so far: a build that saw one gives up
}

// guest is one language's module. Its fields after ready are set by the
// goroutine that prepares it, before ready is closed, and read-only after.
type guest struct {
	lang  string
	ready chan struct{}

	err     error // the guest cannot be used
	cm      wazero.CompiledModule
	sum     [32]byte // sha256 of the module bytes as compiled
	info    moduleInfo
	reseed  bool  // exports execd_reseed
	base    *base // the base image new workers are cloned from; nil: they initialise from scratch
	compile time.Duration
	spares  *spares // clones of base made ahead of need (spare.go)

	basesMu sync.Mutex
	bases   map[[32]byte]*baseSlot // by initParams.key: the current base, and others Restore needed
}

// Abandoned is how many guest calls the hard kill could not stop (possible
// only without StrictTermination) and that are still running.
func (e *Engine) Abandoned() int64 { return e.abandoned.Load() }

// NewEngine creates the runtime and starts compiling every built guest (from
// the on-disk cache when CacheDir is set) and building its base image, in
// the background: it returns before any guest is compiled. It fails when
// the configuration is invalid or no guest is built.
func NewEngine(ctx context.Context, cfg Config, log *zap.Logger) (*Engine, error) {
	return newEngine(ctx, cfg, log, sandbox.Module)
}

// newEngine is NewEngine reading the guest modules from source.
func newEngine(ctx context.Context, cfg Config, log *zap.Logger, source func(lang string) ([]byte, error)) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	langs := sandbox.Languages()
	if len(langs) == 0 {
		_, err := sandbox.Module("javascript")
		return nil, fmt.Errorf("no guest built: %w", err)
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cfg.CacheDir, err)
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(uint32(cfg.MemoryLimitMiB) * 16)
	e := &Engine{
		cfg:    cfg,
		log:    log,
		rt:     wazero.NewRuntimeWithConfig(ctx, rc),
		cache:  cache,
		guests: map[string]*guest{},
		langs:  langs,
		start:  time.Now(),
		source: source,
	}
	e.budget.limit = int64(cfg.TotalMemoryMiB) << 20
	e.budget.spill = e.spill
	if !executableMemory() {
		log.Warn("executable memory is refused to this process (MemoryDenyWriteExecute= or an SELinux execmem denial?): the guests run in wazero's interpreter, many times slower")
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("wasi: %w", err)
	}
	if err := instantiateHost(ctx, e.rt); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("host module %s: %w", hostModule, err)
	}
	e.bg, e.stopBg = context.WithCancel(context.WithoutCancel(ctx))
	for _, lang := range langs {
		g := &guest{lang: lang, ready: make(chan struct{}), bases: map[[32]byte]*baseSlot{}, spares: newSpares()}
		e.guests[lang] = g
		e.wg.Add(1)
		go e.prepare(g)
	}
	return e, nil
}

// prepare compiles g and makes its base image, then closes g.ready.
func (e *Engine) prepare(g *guest) {
	defer e.wg.Done()
	defer close(g.ready)
	start := time.Now()
	if err := e.compile(g); err != nil {
		g.err = err
		if e.bg.Err() == nil { // else the engine closed meanwhile
			e.log.Error("guest unavailable", zap.String("language", g.lang), zap.Error(err))
		}
		return
	}
	g.compile = time.Since(start)
	e.prepareBase(g)
	if e.bg.Err() != nil {
		return
	}
	if g.base != nil && e.cfg.SpareInstances > 0 {
		e.wg.Add(1) // prepare holds one: Close's Wait cannot have returned
		go e.keepSpares(g)
	}
	fields := []zap.Field{zap.String("language", g.lang), zap.Duration("compile", g.compile), zap.Duration("total", time.Since(start))}
	if g.base != nil {
		fields = append(fields, zap.Int64("base_bytes", int64(g.base.img.memSize)))
	}
	e.log.Info("guest ready", fields...)
}

func (e *Engine) compile(g *guest) error {
	bin, err := e.source(g.lang)
	if err != nil {
		return err
	}
	// A guest whose read-only files (Python: its standard library) are
	// missing is half built.
	if _, _, err := sandbox.Files(g.lang); err != nil {
		return err
	}
	bin, info, err := prepareModule(bin, rewrites{killSwitch: e.cfg.StrictTermination, images: true})
	if err != nil {
		return fmt.Errorf("guest %s: %w", g.lang, err)
	}
	// On a cold cache the compilation is what a first call waits for: it
	// uses every processor (and stops when the engine closes).
	cm, err := e.rt.CompileModule(experimental.WithCompilationWorkers(e.bg, runtime.GOMAXPROCS(0)), bin)
	if err != nil {
		return fmt.Errorf("compile guest %s: %w", g.lang, err)
	}
	if err := checkExports(cm); err != nil {
		cm.Close(e.bg)
		return fmt.Errorf("guest %s: %w", g.lang, err)
	}
	_, g.reseed = cm.ExportedFunctions()[reseedExport]
	g.cm, g.info, g.sum = cm, info, sha256.Sum256(bin)
	return nil
}

func checkExports(cm wazero.CompiledModule) error {
	ex := cm.ExportedFunctions()
	for _, name := range []string{exportInit, exportAlloc, exportFree, exportEval, "_initialize"} {
		if _, ok := ex[name]; !ok {
			return fmt.Errorf("missing export %s (see sandbox/ABI.md)", name)
		}
	}
	return nil
}

// Languages lists the languages this engine offers, sorted: those whose
// guest is built. It does not wait for compilation (see Ready); a guest
// that then fails to compile makes NewWorker fail with the reason.
func (e *Engine) Languages() []string {
	return append([]string(nil), e.langs...)
}

// Ready returns a channel that is closed once the guest for lang is
// compiled and its base image is made (or either failed): from then on
// NewWorker and Restore for lang do not wait. On a warm cache that is
// milliseconds after NewEngine; on a cold one seconds (Python compiles
// longest). A caller about to wait can tell its user why. For a language
// the engine does not have, the channel is closed.
func (e *Engine) Ready(lang string) <-chan struct{} {
	if g, ok := e.guests[lang]; ok {
		return g.ready
	}
	return closedChan
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Wait blocks until the guest for lang is ready (see Ready) or ctx ends,
// and returns why the guest cannot be used, if it cannot: ctx's error,
// ErrUnknownLanguage, ErrClosed, or the compile failure.
func (e *Engine) Wait(ctx context.Context, lang string) error {
	_, err := e.guestFor(ctx, lang)
	return err
}

func (e *Engine) guestFor(ctx context.Context, lang string) (*guest, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	g, ok := e.guests[lang]
	if !ok {
		if _, err := sandbox.Module(lang); err != nil && errors.Is(err, sandbox.ErrNotBuilt) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %q (have %v)", ErrUnknownLanguage, lang, e.langs)
	}
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the %s guest: %w", lang, ctx.Err())
	case <-e.bg.Done():
		return nil, ErrClosed
	}
	if g.err != nil {
		return nil, g.err
	}
	return g, nil
}

// MemoryBytes is the linear memory all instances hold together, what
// Config.TotalMemoryMiB caps. Pages shared copy-on-write with a base image
// count in full for every instance (a guest may write them all).
func (e *Engine) MemoryBytes() int64 { return e.budget.used.Load() }

// MemoryBudget is Config.TotalMemoryMiB in bytes, after its default.
func (e *Engine) MemoryBudget() int64 { return e.budget.limit }

// SetReclaim installs the hook a running guest's memory growth calls when
// the budget cannot hold it: reclaim frees memory held elsewhere (the
// workspace registry hibernates idle interpreters, least recently used
// first) and returns the bytes it freed; the growth is then tried once
// more. It runs on the goroutine of the growing guest's call, so it must
// not wait for that call. nil removes it.
func (e *Engine) SetReclaim(reclaim func(need int64) int64) {
	if reclaim == nil {
		e.budget.reclaim.Store(nil)
		return
	}
	e.budget.reclaim.Store(&reclaim)
}

// WorkerOptions configure one worker.
type WorkerOptions struct {
	// Dir is a host directory mounted read-write at /workspace in the
	// guest; "" with FS nil mounts an empty, read-only /workspace.
	Dir string
	// FS, when set, is mounted read-write at /workspace instead of Dir: the
	// workspace registry passes its confined, quota-enforcing file system.
	FS experimentalsys.FS
}

// ErrUnknownLanguage is matched by NewWorker's error for a language the
// engine has no guest for.
var ErrUnknownLanguage = errors.New("unknown language")

// ErrClosed is returned by calls on a closed Engine.
var ErrClosed = errors.New("worker engine closed")

// NewWorker makes a worker for lang: a clone of the guest's base image (its
// interpreter initialised, Python's preload imported), with the guest's
// random generators reseeded; without a base image (see Ready), a freshly
// initialised interpreter. It waits for the guest to be ready, as long as
// ctx allows.
func (e *Engine) NewWorker(ctx context.Context, lang string, opts WorkerOptions) (*Worker, error) {
	g, err := e.guestFor(ctx, lang)
	if err != nil {
		return nil, err
	}
	w := &Worker{e: e, g: g, lang: lang, opts: opts}
	inst, err := e.newInstance(ctx, g, opts)
	if err != nil {
		return nil, err
	}
	w.setInstance(inst)
	return w, nil
}

// Restore makes a worker from img. clone=true reseeds the guest's random
// generators (a new workspace, a fork); clone=false continues the same
// interpreter (hibernation, restart). Its errors wrap ErrImageStale when
// img was made by another build of the guest module (or needs more memory
// than the limit allows), ErrMemoryBudget when the budget cannot hold it.
// It waits for the guest to be ready, as long as ctx allows.
func (e *Engine) Restore(ctx context.Context, img *Image, opts WorkerOptions, clone bool) (*Worker, error) {
	if img == nil {
		return nil, errors.New("restore: nil image")
	}
	g, err := e.guestFor(ctx, img.lang)
	if err != nil {
		return nil, err
	}
	if err := e.checkImage(g, img); err != nil {
		return nil, err
	}
	var b *base
	if img.parent != ([32]byte{}) {
		if b, err = e.baseFor(g, img.init); err != nil {
			return nil, err
		}
		if b.sum != img.parent {
			return nil, fmt.Errorf("%w: the base image the %s image was made from cannot be made again (its memory differs)", ErrImageStale, img.lang)
		}
	}
	inst, err := e.restoreInstance(ctx, g, img, b, opts, clone, false)
	if err != nil {
		return nil, err
	}
	w := &Worker{e: e, g: g, lang: img.lang, opts: opts, restored: true}
	w.setInstance(inst)
	return w, nil
}

// newInstance is a new workspace's instance: a clone of the base image (a
// spare if one is ready, spare.go), or without one an interpreter
// initialised from scratch.
func (e *Engine) newInstance(ctx context.Context, g *guest, opts WorkerOptions) (*instance, error) {
	if g.base != nil {
		if inst := e.takeSpare(g, opts); inst != nil {
			return inst, nil
		}
		return e.restoreInstance(ctx, g, g.base.img, g.base, opts, true, false)
	}
	return e.initInstance(ctx, g, opts, e.initParams(g.lang), false)
}

// initParams is how this engine initialises interpreters of lang.
func (e *Engine) initParams(lang string) initParams {
	p := initParams{heapLimit: e.cfg.heapLimit()}
	if lang == "python" {
		p.preload = pythonPreloadCell(e.cfg.PythonPreload)
	}
	return p
}

func (e *Engine) isClosed() bool {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	return e.closed
}

// hold keeps the engine from freeing instances' memory and the base
// images until release, for work that reads them outside a guest call. A
// guest call needs no hold: wazero leaves a memory in use mapped when it
// closes the module (see linearMemory.Free). hold never waits: it fails
// once Close has begun, and Close waits for the holds taken before.
func (e *Engine) hold() bool {
	if !e.open.TryRLock() { // Close has begun
		return false
	}
	if e.isClosed() {
		e.open.RUnlock()
		return false
	}
	return true
}

func (e *Engine) release() { e.open.RUnlock() }

// Close stops the background work (waiting for a compilation in progress),
// closes the runtime, every instance of every worker, the base images and
// the compilation cache. It waits for snapshots and trims in progress,
// and none starts after it has begun. It is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()
	e.open.Lock()
	defer e.open.Unlock()
	if e.stopBg != nil {
		e.stopBg()
		e.wg.Wait()
	}
	err := e.rt.Close(ctx)
	if cerr := e.cache.Close(ctx); err == nil {
		err = cerr
	}
	for _, g := range e.guests {
		g.closeBases()
	}
	return err
}
