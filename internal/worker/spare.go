package worker

import (
	"strings"
	"sync"

	"go.uber.org/zap"
)

// A new worker is a clone of its guest's base image, and making one is
// most of what a new workspace's first call costs: wazero instantiates the
// module and fills its function table one element at a time, then the
// clone's first guest call (execd_reseed) faults in and copies the pages
// the interpreter touches. Python: about 1 ms each, of the 2.2 ms a new
// worker takes here. None of that depends on the workspace, so each guest
// keeps Config.SpareInstances clones made ahead of need, in the background:
// restored from the base image and reseeded exactly as NewWorker would,
// with an empty /workspace that takeSpare replaces with the worker's own
// before any code runs (wazero opens a mount on first use). Each spare
// reseeded with its own entropy, no two workers share random state.
//
// A spare counts against the memory budget like any instance, but never at
// a workspace's expense: it is made only while the budget has room for it
// and for one more interpreter of the base's size, its memory never asks
// the reclaim hook for room, and the budget closes every spare (spill)
// before it refuses memory or asks for room itself.

// pageRuns are the pages a clone's first call touches, learned once per
// guest from a probe clone (learnFirstCall) and faulted into each spare
// ahead of need (prefault): written pages copied, as the call's
// copy-on-write would, read pages mapped. Neither changes a byte of the
// memory; both move page faults off the call (a clone's first Python call
// spent over a millisecond in them here).
type pageRuns struct {
	written, read []pageRun
}

// pageRun is count 4 KiB pages from page first of a linear memory.
type pageRun struct{ first, count uint32 }

// probeCell is what learnFirstCall runs: any cell goes through the same
// evaluation, printing and envelope code; a Python base with a preload is
// probed importing it too (those are the modules agents import most).
func (e *Engine) probeCell(g *guest) string {
	if g.lang == "python" && g.base.img.init.preload != "" && len(e.cfg.PythonPreload) > 0 {
		return "import " + strings.Join(e.cfg.PythonPreload, ", ") + "\n1+1"
	}
	return "1+1"
}

// learnFirstCall returns the pages a clone of g's base touches in its first
// call; none when they cannot be read (outside Linux, no /proc).
func (e *Engine) learnFirstCall(g *guest) pageRuns {
	inst, err := e.restoreInstance(e.bg, g, g.base.img, g.base, WorkerOptions{}, true, true)
	if err != nil {
		return pageRuns{}
	}
	w := &Worker{e: e, g: g, lang: g.lang}
	w.setInstance(inst)
	defer w.Close()
	if r := w.Run(e.bg, e.probeCell(g), RunOptions{}); r.Status != StatusOK || r.Discontinuous() {
		return pageRuns{}
	}
	runs, err := touchedPages(w.inst.mem.bytes())
	if err != nil {
		e.log.Debug("pages of a first call not learned", zap.String("language", g.lang), zap.Error(err))
	}
	return runs
}

// spares is one guest's pool of ready clones of its base image.
type spares struct {
	mu     sync.Mutex
	list   []*instance
	closed bool
	kick   chan struct{} // (cap 1) a spare was asked for: fill the pool
}

func newSpares() *spares { return &spares{kick: make(chan struct{}, 1)} }

// take removes a spare from the pool, or returns nil. The pool is filled
// again when the worker that took it has run its first call (Worker.Run
// calls wake), so that making the next spare does not compete with that
// call; when the pool was empty, at once (the budget may have room again
// since it was spilled).
func (s *spares) take() *instance {
	s.mu.Lock()
	var inst *instance
	if n := len(s.list); n > 0 {
		inst, s.list = s.list[n-1], s.list[:n-1]
	}
	s.mu.Unlock()
	if inst == nil {
		s.wake()
	} else {
		inst.refill = s
	}
	return inst
}

// wake asks keepSpares to fill the pool.
func (s *spares) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// put adds inst to the pool; false (and inst is the caller's to close)
// when the pool is closed.
func (s *spares) put(inst *instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.list = append(s.list, inst)
	return true
}

func (s *spares) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// drain removes every spare, and with closing keeps the pool empty for
// good. The caller closes what it returns.
func (s *spares) drain(closing bool) []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.list
	s.list = nil
	s.closed = s.closed || closing
	return list
}

// takeSpare returns one of g's spares bound to opts, or nil.
func (e *Engine) takeSpare(g *guest, opts WorkerOptions) *instance {
	if e.cfg.SpareInstances == 0 {
		return nil
	}
	inst := g.spares.take()
	if inst == nil {
		return nil
	}
	// The only guest code run in it (execd_reseed) does not touch files,
	// and wazero opens a mount on first use: from its first call on, the
	// guest's /workspace is the worker's own.
	inst.workspace.FS = workspaceFS(opts)
	inst.mem.noReclaim = false
	return inst
}

// keepSpares keeps g's pool full until the engine closes. It runs once g
// has a base image.
func (e *Engine) keepSpares(g *guest) {
	defer e.wg.Done()
	defer func() {
		for _, inst := range g.spares.drain(true) {
			inst.close()
		}
	}()
	var hot *pageRuns
	for {
		for g.spares.len() < e.cfg.SpareInstances && e.buildSpare(g, &hot) {
		}
		select {
		case <-g.spares.kick:
		case <-e.bg.Done():
			return
		}
	}
}

// buildSpare makes one spare of g and puts it in the pool, learning the
// pages of a first call before the first. It holds spareBuild throughout
// and gives up what it made when a spill happened meanwhile, so that
// memory a spill was asked for is never held by a spare being built. It
// reports whether it added one.
func (e *Engine) buildSpare(g *guest, hot **pageRuns) bool {
	e.spareBuild.Lock()
	defer e.spareBuild.Unlock()
	gen := e.spills.Load()
	if e.bg.Err() != nil || !e.roomForSpare(g) {
		return false
	}
	if *hot == nil {
		runs := e.learnFirstCall(g)
		*hot = &runs
		if e.spills.Load() != gen {
			return false
		}
	}
	inst, err := e.restoreInstance(e.bg, g, g.base.img, g.base, WorkerOptions{}, true, true)
	if err != nil {
		if e.bg.Err() == nil {
			e.log.Debug("spare instance", zap.String("language", g.lang), zap.Error(err))
		}
		return false
	}
	prefault(inst.mem.bytes(), **hot)
	return e.keepSpare(g, inst, gen)
}

// keepSpare puts inst, a spare whose build began at spill generation gen,
// in g's pool, or closes it when a spill happened since (or the pool is
// closed) and reports false.
func (e *Engine) keepSpare(g *guest, inst *instance, gen int64) bool {
	if e.spills.Load() != gen || !g.spares.put(inst) {
		inst.close()
		return false
	}
	return true
}

// roomForSpare reports whether the budget holds a spare of g and, beside
// it, one more interpreter the size of g's base image.
func (e *Engine) roomForSpare(g *guest) bool {
	need := 2 * int64(g.base.img.memSize)
	return e.budget.used.Load()+need <= e.budget.limit
}

// spill closes every guest's spares (the budget's spill hook): it waits
// for a spare being built, which then gives up what it made, drops the
// requests to refill that are pending (the pools fill again at the next
// take, after the memory was had), and closes the pools' spares.
func (e *Engine) spill() {
	e.spills.Add(1)
	e.spareBuild.Lock() // waits for the build in progress
	defer e.spareBuild.Unlock()
	for _, g := range e.guests {
		select {
		case <-g.spares.kick:
		default:
		}
		for _, inst := range g.spares.drain(false) {
			inst.close()
		}
	}
}
