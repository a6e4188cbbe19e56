package worker

import (
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"go.uber.org/zap"

	"execd/sandbox"
)

// instance is one module instance of a guest, with its exports resolved.
type instance struct {
	mod         api.Module
	alloc, eval api.Function
	// callStack holds the parameters and results of evalCall's two guest
	// calls (CallWithStack), so that they allocate nothing: a run is one
	// call at a time on an instance.
	callStack      [2]uint64
	stdout, stderr *stream
	mem            *linearMemory
	files          *openFiles
	workspace      *countingFS // mounted at /workspace; bind sets a spare's
	clock          *guestClock
	parent         *base // the base image its memory derives from; nil: zero memory
	init           initParams
	calls          atomic.Int32 // host and guest code using mod's memory (enter)
	spare          bool         // made for the spare pool (spare.go): its memory is made noReclaim
	refill         *spares      // taken from this pool, which waits for its first call to refill
}

// enter marks the start of code that uses the instance's memory (a guest
// call, a snapshot); false when the module is closed, and so its memory
// gone. A module closed after enter keeps its pages mapped until leave
// (linearMemory.Free).
func (i *instance) enter() bool {
	i.calls.Add(1)
	if i.mod.IsClosed() {
		i.calls.Add(-1)
		return false
	}
	return true
}

func (i *instance) leave() { i.calls.Add(-1) }

// guestClock is an instance's monotonic clock (WASI clock_time_get of
// CLOCK_MONOTONIC): the engine's monotonic time plus an offset, so that an
// instance restored from an image continues from the image's reading and
// never sees time go backwards, on another host or after a restart too.
// A deterministic clock (base images) advances one microsecond per reading.
type guestClock struct {
	origin time.Time
	offset atomic.Int64
	det    bool
}

func (c *guestClock) now() int64 {
	if c.det {
		return c.offset.Add(1000)
	}
	return time.Since(c.origin).Nanoseconds() + c.offset.Load()
}

// continueFrom sets the clock so that it reads t (and on from there) now.
func (c *guestClock) continueFrom(t int64) {
	if c.det {
		c.offset.Store(t)
		return
	}
	c.offset.Store(t - time.Since(c.origin).Nanoseconds())
}

// fixedWalltime is the wall clock of a base image's initialisation.
func fixedWalltime() (int64, int32) { return 1577836800, 0 } // 2020-01-01T00:00:00Z

// newShell is an instance without a module yet.
func (e *Engine) newShell(det bool) *instance {
	return &instance{
		stdout: &stream{}, stderr: &stream{}, files: &openFiles{},
		clock: &guestClock{origin: e.start, det: det},
	}
}

// moduleConfig is the configuration of inst's module. Every instance has
// the same mounts in the same order: /workspace (an empty one when the
// worker has none, see emptyDir), then the guest's own read-only files,
// then the packages cache (PackagesMount, read-only; empty without one).
// det makes clocks and randomness deterministic (base images, base.go).
func (e *Engine) moduleConfig(g *guest, inst *instance, opts WorkerOptions, det bool) (wazero.ModuleConfig, error) {
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		WithNanotime(inst.clock.now, 1).
		WithSysNanosleep()
	if det {
		mc = mc.WithWalltime(fixedWalltime, 1).WithRandSource(rand.NewChaCha8([32]byte{'e', 'x', 'e', 'c', 'd'}))
	} else {
		mc = mc.WithSysWalltime().WithRandSource(cryptoRand{})
	}
	inst.workspace = &countingFS{FS: workspaceFS(opts), o: inst.files}
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(inst.workspace, "/workspace")
	files, at, err := sandbox.Files(g.lang)
	if err != nil {
		return nil, err
	}
	if files != nil {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(&countingFS{FS: &sysfs.AdaptFS{FS: files}, o: inst.files}, at)
	}
	pkgs := emptyDir
	if e.cfg.PackagesDir != "" {
		pkgs = &sysfs.ReadFS{FS: sysfs.DirFS(e.cfg.PackagesDir)}
	}
	fsc = fsc.(sysfs.FSConfig).WithSysFSMount(&countingFS{FS: pkgs, o: inst.files}, PackagesMount)
	return mc.WithFSConfig(fsc), nil
}

// workspaceFS is the file system opts mount at /workspace.
func workspaceFS(opts WorkerOptions) experimentalsys.FS {
	switch {
	case opts.FS != nil:
		return opts.FS
	case opts.Dir != "":
		return sysfs.DirFS(opts.Dir)
	}
	return emptyDir
}

// instantiate makes inst's module from g, its memory from the engine's
// allocator. start writes the module's data segments and runs the guest's
// _initialize; without it the memory is all zeros (a restore writes it).
func (e *Engine) instantiate(ctx context.Context, g *guest, inst *instance, mc wazero.ModuleConfig, start bool) (err error) {
	switch {
	case start && g.info.dataInit != "":
		mc = mc.WithStartFunctions(g.info.dataInit, "_initialize")
	case start:
		mc = mc.WithStartFunctions("_initialize")
	default:
		mc = mc.WithStartFunctions()
	}
	alloc := &memoryAllocator{b: &e.budget, busy: &inst.calls, noReclaim: inst.spare}
	ictx := experimental.WithMemoryAllocator(ctx, alloc)
	defer func() {
		// wazero indexes the memory the allocator returned without a
		// check: a failed reservation panics there.
		if r := recover(); r != nil {
			err = fmt.Errorf("instantiate guest %s: %v", g.lang, r)
		}
		if err != nil && alloc.got != nil {
			alloc.got.Free()
		}
	}()
	mod, err := e.rt.InstantiateModule(ictx, g.cm, mc)
	if err != nil {
		return fmt.Errorf("instantiate guest %s: %w", g.lang, err)
	}
	if alloc.got == nil || alloc.got.mem == nil {
		mod.Close(ctx)
		return fmt.Errorf("instantiate guest %s: no memory", g.lang)
	}
	inst.mod, inst.mem = mod, alloc.got
	inst.alloc = mod.ExportedFunction(exportAlloc)
	inst.eval = mod.ExportedFunction(exportEval)
	return nil
}

// initInstance initialises an interpreter from scratch: _initialize, then
// execd_init.
func (e *Engine) initInstance(ctx context.Context, g *guest, opts WorkerOptions, p initParams, det bool) (*instance, error) {
	if err := e.budget.check(int64(minMemory(g))); err != nil {
		return nil, err
	}
	inst := e.newShell(det)
	mc, err := e.moduleConfig(g, inst, opts, det)
	if err != nil {
		return nil, err
	}
	// The init call must not be hard-killed by a cancelled request context
	// half way: an interrupted init leaves nothing usable anyway.
	ictx := withRunState(context.WithoutCancel(ctx), &runState{})
	start := time.Now()
	if err := e.instantiate(ictx, g, inst, mc, true); err != nil {
		return nil, err
	}
	rc, err := inst.mod.ExportedFunction(exportInit).Call(ictx, uint64(p.heapLimit))
	if err == nil && int32(rc[0]) != 0 {
		err = fmt.Errorf("%s returned %d", exportInit, int32(rc[0]))
	}
	if err != nil {
		inst.close()
		return nil, fmt.Errorf("init guest %s: %w", g.lang, err)
	}
	inst.init = p
	e.log.Debug("instance initialised", zap.String("language", g.lang), zap.Duration("took", time.Since(start)))
	return inst, nil
}

// minMemory is the linear memory a fresh instance of g starts with.
func minMemory(g *guest) uint64 {
	for _, m := range g.cm.ExportedMemories() {
		return uint64(m.Min()) << 16
	}
	return 0
}

// blankInstance instantiates g without _initialize: its memory is the
// module's minimum, all zeros (the data segments are passive, see
// prepareModule), and no guest code has run. spare makes it for the spare
// pool (its memory never reclaims, see linearMemory.noReclaim).
func (e *Engine) blankInstance(ctx context.Context, g *guest, opts WorkerOptions, spare bool) (*instance, error) {
	inst := e.newShell(false)
	inst.spare = spare
	mc, err := e.moduleConfig(g, inst, opts, false)
	if err != nil {
		return nil, err
	}
	if err := e.instantiate(withRunState(context.WithoutCancel(ctx), &runState{}), g, inst, mc, false); err != nil {
		return nil, err
	}
	return inst, nil
}

// restoreInstance makes an instance whose state is img's (which
// checkImage accepted, or one of g's base images): a blank one, its
// memory grown to the image's size, b's pages
// mapped copy-on-write under it, the image's own pages written over them,
// its globals set and its clock continued. clone reseeds the guest's random
// generators (when it exports execd_reseed). spare makes it for the spare
// pool (spare.go): no budget check (the pool checked), no reclaim.
func (e *Engine) restoreInstance(ctx context.Context, g *guest, img *Image, b *base, opts WorkerOptions, clone, spare bool) (*instance, error) {
	if !spare {
		if err := e.budget.check(int64(img.memSize)); err != nil {
			return nil, err
		}
	}
	inst, err := e.blankInstance(ctx, g, opts, spare)
	if err != nil {
		return nil, err
	}
	inst.clock.continueFrom(img.clock)
	fail := func(err error) (*instance, error) {
		inst.close()
		return nil, err
	}
	m0 := inst.mem.size.Load()
	if img.memSize < m0 {
		return fail(fmt.Errorf("%w: the image holds %d bytes of memory, less than the module's %d", ErrImageStale, img.memSize, m0))
	}
	if img.memSize > m0 {
		if _, ok := inst.mod.Memory().Grow(uint32((img.memSize - m0) >> 16)); !ok {
			var err error
			if !spare { // a spare gives way without spilling the others (and holds spareBuild)
				err = e.budget.check(int64(img.memSize - m0))
			}
			if err == nil { // room was made after the growth failed
				err = fmt.Errorf("%w: the growth to %d MiB was refused", ErrMemoryBudget, img.memSize>>20)
			}
			return fail(err)
		}
	}
	// The memory is zeros (the data segments are passive, see
	// prepareModule): the base's pages go under the image's own.
	if b != nil {
		if err := inst.mem.mapShared(b.shared, min(b.img.memSize, img.memSize)); err != nil {
			return fail(err)
		}
	}
	// The memory holds the base's pages (or zeros): each stored page is
	// the difference from them.
	mem := inst.mem.bytes()
	for i, p := range img.pages {
		page := mem[int(p)*imagePage : int(p+1)*imagePage]
		subtle.XORBytes(page, page, img.data[i*imagePage:(i+1)*imagePage])
	}
	for i, gl := range g.info.globals {
		inst.mod.ExportedGlobal(gl.export).(api.MutableGlobal).Set(img.globals[i].val)
	}
	inst.parent, inst.init = b, img.init
	if clone && g.reseed {
		// A clone that could not reseed would repeat its image's random
		// numbers: sandbox/ABI.md says not to use it.
		rctx := withRunState(context.WithoutCancel(ctx), &runState{})
		rc, err := inst.mod.ExportedFunction(reseedExport).Call(rctx)
		if err == nil && int32(rc[0]) != 0 {
			err = fmt.Errorf("returned %d", int32(rc[0]))
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", reseedExport, err))
		}
	}
	return inst, nil
}

// snapshot images inst: the pages that differ from its base image (zero
// pages without one), each stored as its XOR with the base's page, its
// globals and its clock. The caller makes sure no call is running.
func (inst *instance) snapshot(g *guest) *Image {
	mem := inst.mem.bytes()
	var ref []byte
	img := &Image{lang: g.lang, module: g.sum, init: inst.init, memSize: uint64(len(mem)), clock: inst.clock.now()}
	if inst.parent != nil {
		ref = inst.parent.shared.bytes()
		img.parent = inst.parent.sum
	}
	want := func(off int) []byte {
		if off < len(ref) {
			return ref[off : off+imagePage]
		}
		return zeroPage[:]
	}
	for off := 0; off < len(mem); off += imagePage {
		if !bytes.Equal(mem[off:off+imagePage], want(off)) {
			img.pages = append(img.pages, uint32(off/imagePage))
		}
	}
	img.data = make([]byte, len(img.pages)*imagePage)
	for i, p := range img.pages {
		off := int(p) * imagePage
		subtle.XORBytes(img.data[i*imagePage:(i+1)*imagePage], mem[off:off+imagePage], want(off))
	}
	for _, gl := range g.info.globals {
		img.globals = append(img.globals, imageGlobal{typ: gl.typ, val: inst.mod.ExportedGlobal(gl.export).Get()})
	}
	return img
}

var zeroPage [imagePage]byte

func (i *instance) close() {
	i.stdout.swap(nil)
	i.stderr.swap(nil)
	i.mod.Close(context.Background())
}

func withRunState(ctx context.Context, st *runState) context.Context {
	return context.WithValue(ctx, runKey{}, st)
}
