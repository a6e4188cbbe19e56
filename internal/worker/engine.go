package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"go.uber.org/zap"

	"execd/sandbox"
)

// Config is the engine-wide sandbox configuration. Zero values mean the
// documented defaults.
type Config struct {
	// CacheDir holds wazero's on-disk compilation cache; "" keeps it in
	// memory only (every process start compiles again).
	CacheDir string
	// MemoryLimitMiB caps each instance's linear memory; 0 means 256. The
	// interpreter's own heap limit is set below it, so running out of memory
	// is an ordinary "oom" result, not a crash. Minimum 32.
	MemoryLimitMiB int
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
}

const (
	defaultMemoryLimitMiB = 256
	minMemoryLimitMiB     = 32
	defaultMaxOutput      = 64 << 10
	defaultGrace          = 2 * time.Second
	// killWait bounds the wait for a strictly terminated call to unwind.
	killWait = time.Second
)

func (c Config) withDefaults() (Config, error) {
	if c.MemoryLimitMiB == 0 {
		c.MemoryLimitMiB = defaultMemoryLimitMiB
	}
	if c.MemoryLimitMiB < minMemoryLimitMiB || c.MemoryLimitMiB > 4095 {
		return c, fmt.Errorf("memory limit %d MiB: must be between %d and 4095", c.MemoryLimitMiB, minMemoryLimitMiB)
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = defaultMaxOutput
	}
	if c.MaxOutputBytes < 0 {
		return c, fmt.Errorf("max output bytes %d: must not be negative", c.MaxOutputBytes)
	}
	if c.InterruptGrace == 0 {
		c.InterruptGrace = defaultGrace
	}
	if c.InterruptGrace < 0 {
		return c, fmt.Errorf("interrupt grace %v: must not be negative", c.InterruptGrace)
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
type Engine struct {
	cfg     Config
	log     *zap.Logger
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	guests  map[string]wazero.CompiledModule
	langs   []string
	closeMu sync.Mutex
	closed  bool

	abandoned atomic.Int64 // guest calls the hard kill could not stop, still running
}

// Abandoned is how many guest calls the hard kill could not stop (possible
// only without StrictTermination) and that are still running.
func (e *Engine) Abandoned() int64 { return e.abandoned.Load() }

// NewEngine creates the runtime and compiles every built guest once (from
// the on-disk cache when CacheDir is set). It fails when no guest is built.
func NewEngine(ctx context.Context, cfg Config, log *zap.Logger) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
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
		guests: map[string]wazero.CompiledModule{},
	}
	if err := e.setup(ctx); err != nil {
		e.Close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *Engine) setup(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		return fmt.Errorf("wasi: %w", err)
	}
	if err := instantiateHost(ctx, e.rt); err != nil {
		return fmt.Errorf("host module %s: %w", hostModule, err)
	}
	langs := sandbox.Languages()
	if len(langs) == 0 {
		_, err := sandbox.Module("javascript")
		return fmt.Errorf("no guest built: %w", err)
	}
	for _, lang := range langs {
		bin, err := sandbox.Module(lang)
		if err != nil {
			return err
		}
		// A guest whose read-only files (Python: its standard library)
		// are missing is half built: leave the language out.
		if _, _, err := sandbox.Files(lang); err != nil {
			e.log.Warn("guest skipped", zap.String("language", lang), zap.Error(err))
			continue
		}
		if e.cfg.StrictTermination {
			if bin, err = addKillSwitch(bin); err != nil {
				return fmt.Errorf("guest %s: %w", lang, err)
			}
		}
		start := time.Now()
		cm, err := e.rt.CompileModule(ctx, bin)
		if err != nil {
			return fmt.Errorf("compile guest %s: %w", lang, err)
		}
		if err := checkExports(cm); err != nil {
			return fmt.Errorf("guest %s: %w", lang, err)
		}
		e.guests[lang] = cm
		e.langs = append(e.langs, lang)
		e.log.Debug("guest compiled", zap.String("language", lang), zap.Duration("took", time.Since(start)))
	}
	sort.Strings(e.langs)
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

// Languages lists the languages this engine can run, sorted.
func (e *Engine) Languages() []string {
	return append([]string(nil), e.langs...)
}

// WorkerOptions configure one worker.
type WorkerOptions struct {
	// Dir is a host directory mounted read-write at /workspace in the
	// guest; "" mounts nothing.
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

// NewWorker instantiates the guest for lang and initialises its
// interpreter.
func (e *Engine) NewWorker(ctx context.Context, lang string, opts WorkerOptions) (*Worker, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	if _, ok := e.guests[lang]; !ok {
		if _, err := sandbox.Module(lang); err != nil && errors.Is(err, sandbox.ErrNotBuilt) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %q (have %v)", ErrUnknownLanguage, lang, e.langs)
	}
	w := &Worker{e: e, lang: lang, opts: opts}
	inst, err := e.instantiate(ctx, lang, opts)
	if err != nil {
		return nil, err
	}
	w.inst = inst
	return w, nil
}

func (e *Engine) isClosed() bool {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	return e.closed
}

// Close closes the runtime, every instance of every worker, and the
// compilation cache. It is idempotent.
func (e *Engine) Close(ctx context.Context) error {
	e.closeMu.Lock()
	if e.closed {
		e.closeMu.Unlock()
		return nil
	}
	e.closed = true
	e.closeMu.Unlock()
	err := e.rt.Close(ctx)
	if cerr := e.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// instance is one module instance of a guest, with its exports resolved.
type instance struct {
	mod            api.Module
	alloc, eval    api.Function
	stdout, stderr *stream
}

func (e *Engine) instantiate(ctx context.Context, lang string, opts WorkerOptions) (*instance, error) {
	inst := &instance{stdout: &stream{}, stderr: &stream{}}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions("_initialize").
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(cryptoRand{})
	fsc := wazero.NewFSConfig()
	switch {
	case opts.FS != nil:
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(opts.FS, "/workspace")
	case opts.Dir != "":
		fsc = fsc.WithDirMount(opts.Dir, "/workspace")
	}
	// The guest's own read-only files, e.g. Python's standard library.
	if files, at, err := sandbox.Files(lang); err != nil {
		return nil, err
	} else if files != nil {
		fsc = fsc.WithFSMount(files, at)
	}
	mc = mc.WithFSConfig(fsc)
	// The init call must not be hard-killed by a cancelled request context
	// half way: an interrupted init leaves nothing usable anyway.
	ictx := context.WithValue(context.WithoutCancel(ctx), runKey{}, &runState{})
	start := time.Now()
	mod, err := e.rt.InstantiateModule(ictx, e.guests[lang], mc)
	if err != nil {
		return nil, fmt.Errorf("instantiate guest %s: %w", lang, err)
	}
	inst.mod = mod
	inst.alloc = mod.ExportedFunction(exportAlloc)
	inst.eval = mod.ExportedFunction(exportEval)
	rc, err := mod.ExportedFunction(exportInit).Call(ictx, uint64(e.cfg.heapLimit()))
	if err == nil && int32(rc[0]) != 0 {
		err = fmt.Errorf("%s returned %d", exportInit, int32(rc[0]))
	}
	if err != nil {
		mod.Close(ictx)
		return nil, fmt.Errorf("init guest %s: %w", lang, err)
	}
	e.log.Debug("instance ready", zap.String("language", lang), zap.Duration("took", time.Since(start)))
	return inst, nil
}

func (i *instance) close() {
	i.stdout.swap(nil)
	i.stderr.swap(nil)
	i.mod.Close(context.Background())
}
