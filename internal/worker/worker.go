package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Worker is one sandbox: an instance of one guest that keeps its
// interpreter state from Run to Run. Run and Close are serialised by the
// worker itself; Close waits for a Run in progress (cancel its ctx first).
type Worker struct {
	e    *Engine
	g    *guest
	lang string
	opts WorkerOptions

	mu       sync.Mutex
	inst     *instance // nil after a kill or crash, until the next Run
	lost     bool      // state was lost and no Run has said so yet
	restored bool      // made by Restore and no Run has said so yet
	closed   bool
	touched  bool // inst's memory was used since the last Trim

	mem    atomic.Pointer[linearMemory] // inst's memory, for MemoryBytes during a Run
	refill *spares                      // the pool an instance was taken from: woken after the next Run
}

func (w *Worker) setInstance(inst *instance) {
	w.inst = inst
	w.touched = inst != nil
	if inst == nil {
		w.mem.Store(nil)
		return
	}
	w.mem.Store(inst.mem)
	if inst.refill != nil {
		w.refill, inst.refill = inst.refill, nil
	}
}

// wakeRefill lets the pool the worker's instance came from make another
// spare, now that the worker's call is over (spare.go).
func (w *Worker) wakeRefill() {
	if w.refill != nil {
		w.refill.wake()
		w.refill = nil
	}
}

// MemoryBytes is the linear memory the worker's instance holds now (0
// without one), what it counts against the engine's memory budget. It is
// safe to call during a Run. wasm memory never shrinks: a guest that grew
// and freed keeps its size until its worker is closed; a worker restored
// from its image has that size again, but only the image's pages are
// resident (pages equal to the base image's stay shared, zero pages are
// not stored).
func (w *Worker) MemoryBytes() int64 {
	if m := w.mem.Load(); m != nil {
		return int64(m.size.Load())
	}
	return 0
}

// Snapshot images the worker's interpreter between runs (it waits for a
// Run in progress). Its errors wrap ErrNotSnapshottable when there is
// nothing to image or the image would be incomplete: the worker or its
// engine is closed (a Close of the engine waits for a Snapshot in progress),
// its instance was discarded and not replaced yet, the guest holds files
// open (their descriptors live on the host, see openFiles), or the guest's
// state is not only memory and globals.
func (w *Worker) Snapshot(ctx context.Context) (*Image, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case w.closed || w.e.isClosed():
		return nil, fmt.Errorf("%w: the worker is closed", ErrNotSnapshottable)
	case w.inst == nil:
		return nil, fmt.Errorf("%w: no instance (the last one was discarded)", ErrNotSnapshottable)
	case w.g.info.notImageable != "":
		return nil, fmt.Errorf("%w: the guest's state is not only memory and globals (%s)", ErrNotSnapshottable, w.g.info.notImageable)
	}
	if n := w.inst.files.count(); n > 0 {
		return nil, fmt.Errorf("%w: the guest holds %d file(s) open", ErrNotSnapshottable, n)
	}
	if !w.e.hold() {
		return nil, fmt.Errorf("%w: the worker is closed", ErrNotSnapshottable)
	}
	defer w.e.release()
	if !w.inst.enter() {
		return nil, fmt.Errorf("%w: the instance is closed", ErrNotSnapshottable)
	}
	defer w.inst.leave()
	w.touched = true // the snapshot read every page
	return w.inst.snapshot(w.g), nil
}

// Trim gives back the page-table entries of the base image pages the
// worker's interpreter has read but never written, and returns their
// bytes: what the process's resident set shrank by. Its memory and state
// are unchanged (the pages stay in the base image's shared memory, and the
// next call maps those it reads again, a minor page fault each), so trim
// an idle worker, not one between two calls of a burst. It may be called
// at any time and never waits: a worker in a Run, Snapshot or Close is
// left as it is, and so is one closed, without an instance, not made from
// a base image, or not used since the last Trim (0 for all of them). A
// Run that starts during a Trim waits for it (well under a millisecond).
// It does nothing outside Linux. See trim.go.
func (w *Worker) Trim() (freed int64) {
	// A janitor must not wait for a call, which may last minutes.
	if !w.mu.TryLock() {
		return 0
	}
	defer w.mu.Unlock()
	if w.closed || w.inst == nil || !w.touched || w.inst.parent == nil {
		return 0
	}
	if !w.e.hold() { // the engine is closing: its memory may go meanwhile
		return 0
	}
	defer w.e.release()
	if !w.inst.enter() {
		return 0
	}
	defer w.inst.leave()
	w.touched = false
	freed, err := w.inst.mem.trimBase(uint64(len(w.inst.parent.shared.bytes())))
	if err != nil {
		// Where /proc/self/pagemap is hidden (some container runtimes)
		// every trim fails the same way: not worth more than debug.
		w.e.log.Debug("trim of an idle interpreter's memory failed", zap.String("language", w.lang), zap.Error(err))
	}
	return freed
}

// Language is the worker's guest language.
func (w *Worker) Language() string { return w.lang }

// Close releases the instance. It is idempotent.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.wakeRefill()
	if w.inst != nil {
		w.inst.close()
		w.setInstance(nil)
	}
	return nil
}

// Run evaluates code as the next cell of the worker's session.
//
// When ctx ends or opts.Timeout passes, the guest is asked to stop (a soft
// interrupt that keeps its state; an input() it waits in ends); if it has
// not returned after the engine's InterruptGrace, the instance is killed
// and replaced, and the Result says Reset. The status is timeout when the
// timeout or ctx's deadline passed, interrupted for any other
// cancellation. A guest crash also replaces the instance. Run never panics
// on guest behaviour; opts.Sink and opts.Input are called on the goroutine
// running the guest.
func (w *Worker) Run(ctx context.Context, code string, opts RunOptions) Result {
	start := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	res, waited := w.run(ctx, code, opts)
	res.Duration = time.Since(start) - waited
	w.wakeRefill()
	return res
}

func (w *Worker) run(ctx context.Context, code string, opts RunOptions) (Result, time.Duration) {
	if w.closed || w.e.isClosed() {
		return sandboxError("the worker is closed"), 0
	}
	if err := ctx.Err(); err != nil {
		return Result{Status: cancelStatus(ctx, false), Error: cancelError(ctx, false, false)}, 0
	}
	if w.inst == nil {
		inst, err := w.e.newInstance(ctx, w.g, w.opts)
		if err != nil {
			w.e.log.Error("instance replacement failed", zap.String("language", w.lang), zap.Error(err))
			res := sandboxError("could not start an instance: " + err.Error())
			res.FreshInstance = true
			return res, 0
		}
		w.setInstance(inst)
	}
	inst := w.inst
	w.touched = true
	reset := w.lost
	w.lost = false
	restored := w.restored
	w.restored = false
	refused := inst.mem.refused.Load()

	max := w.e.cfg.MaxOutputBytes
	stdout, stderr := newOutputBuffers(max)
	inst.stdout.swap(stdout)
	inst.stderr.swap(stderr)

	st := &runState{sink: opts.Sink, yielded: time.Since(yieldClock), input: opts.Input,
		maxImageBytes: w.e.cfg.MaxImageBytes, maxImages: w.e.cfg.MaxImages, budget: &w.e.budget, maxInputAnswer: w.e.cfg.MaxInputAnswerBytes,
		tools: opts.Tools, pkgs: opts.Packages}
	stop := st.begin(ctx, opts.Network)
	defer stop()
	sp := &st.stopper
	sp.w, sp.st, sp.end = w, st, stop
	if !w.e.cfg.StrictTermination {
		sp.abandon = make(chan struct{})
	}
	st.timer = newRunTimer(opts.Timeout, func() { sp.stop(true) })
	unwatch := context.AfterFunc(ctx, func() { sp.stop(false) })
	callCtx := st.Context()

	// With the kill switch the call ends within microseconds of the kill
	// (the guests' sleeps and input waits end at the interrupt), so it runs
	// on this goroutine. Without it a killed guest may never return: it
	// runs on its own goroutine, abandoned at the kill.
	var out outcome
	var done chan outcome
	abandoned := false
	if w.e.cfg.StrictTermination {
		out.env, out.err = inst.evalCall(callCtx, code)
	} else {
		done = make(chan outcome, 1)
		go func() {
			env, err := inst.evalCall(callCtx, code)
			done <- outcome{env, err}
		}()
		select {
		case out = <-done:
		case <-sp.abandon:
			abandoned = true
		}
	}
	unwatch()
	st.timer.stop()
	timedOut, killed := sp.seal()

	// Detach the buffers and the sink: an abandoned guest may go on.
	st.finished.Store(true)
	if !st.net.end(netEndWait) {
		w.e.log.Warn("requests of a run still running after its end", zap.String("language", w.lang))
	}
	inst.stdout.swap(nil)
	inst.stderr.swap(nil)
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), FreshInstance: reset, Restored: restored}
	res.Truncated = stdout.Truncated() || stderr.Truncated()
	res.BudgetExceeded = inst.mem.refused.Load() > refused
	st.mu.Lock()
	res.Images, res.ImagesRefused = st.images, st.imagesRefused
	st.budget.give(st.imageBytes)
	st.imageBytes = 0
	st.mu.Unlock()
	res.ToolCalls = st.net.madeCalls()
	if opts.Network != nil {
		if reached := opts.Network.Reached(); len(reached) > 0 {
			res.Network = reached
		}
	}
	var waited time.Duration
	if !abandoned { // else the guest's goroutine may still be in an input()
		waited = st.waited
	}

	switch {
	case killed:
		w.drop(inst, abandoned, done)
		res.Status = cancelStatus(ctx, timedOut)
		res.Error = cancelError(ctx, timedOut, true)
		res.Discarded = DiscardKilled
		w.e.log.Info("sandbox killed after the interrupt grace", zap.String("language", w.lang), zap.Bool("abandoned", abandoned))
		return res, waited
	case out.err != nil:
		w.drop(inst, false, done)
		res.Status = StatusError
		res.Error = crashError(out.err)
		res.Discarded = DiscardCrashed
		w.e.log.Warn("sandbox crashed", zap.String("language", w.lang), zap.Error(out.err))
		return res, waited
	}

	env := out.env
	res.Error = env.Error
	if env.Value != nil {
		res.Value = env.Value
		if v, cut := truncateString(*env.Value, max); cut {
			res.Value = &v
			res.Truncated = true
		}
	}
	switch env.Status {
	case "ok":
		res.Status = StatusOK
	case "error":
		res.Status = StatusError
	case "oom":
		res.Status = StatusOOM
	case "interrupted":
		if ctx.Err() != nil || timedOut {
			res.Status = cancelStatus(ctx, timedOut)
			res.Error = cancelError(ctx, timedOut, false)
		} else {
			res.Status = StatusError
		}
	default:
		res.Status = StatusError
		res.Error = &GuestError{Type: "SandboxError", Message: fmt.Sprintf("guest returned unknown status %q", env.Status)}
	}
	return res, waited
}

// stopper turns a run's stop conditions, its timeout and its ctx, into the
// soft interrupt (which also ends a wait for input) and, InterruptGrace
// later, the kill. Timers and context.AfterFunc call it: a run that is not
// stopped costs no goroutine.
type stopper struct {
	w       *Worker
	st      *runState
	end     func()        // ends the run's stopCtx: its input waits and requests
	abandon chan struct{} // without strict termination: closed at the kill

	mu       sync.Mutex
	sealed   bool // the call returned: too late to stop it
	stopping bool
	timedOut bool
	killed   bool
	grace    *time.Timer
}

func (sp *stopper) stop(timedOut bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.sealed || sp.stopping {
		return
	}
	sp.stopping, sp.timedOut = true, timedOut
	sp.st.interrupt.Store(true)
	sp.end() // a wait for input or a request in flight ends now, not when the guest notices
	sp.w.e.observer().Interrupted(sp.w.lang)
	sp.grace = time.AfterFunc(sp.w.e.cfg.InterruptGrace, sp.kill)
}

func (sp *stopper) kill() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.sealed {
		return
	}
	sp.killed = true
	sp.w.e.observer().Killed(sp.w.lang)
	sp.st.kill.Store(true) // with the kill switch the guest traps within microseconds
	if sp.abandon != nil {
		close(sp.abandon)
	}
}

// seal ends the stopper once the call has returned (or was abandoned) and
// says whether the timeout stopped it and whether it was killed.
func (sp *stopper) seal() (timedOut, killed bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.sealed = true
	if sp.grace != nil {
		sp.grace.Stop()
	}
	return sp.timedOut, sp.killed
}

// netEndWait bounds how long the end of a run waits for its aborted
// requests' goroutines.
const netEndWait = 5 * time.Second

// outcome is what the goroutine running a guest call hands back.
type outcome struct {
	env *envelope
	err error
}

// drop forgets the current instance after a kill or crash; the next Run
// starts a fresh one. An abandoned instance (its call still running) is
// closed when the call returns, if ever.
func (w *Worker) drop(inst *instance, abandoned bool, done <-chan outcome) {
	w.setInstance(nil)
	w.lost = true
	if !abandoned {
		inst.close()
		return
	}
	w.e.abandoned.Add(1)
	go func() {
		<-done
		inst.close()
		w.e.abandoned.Add(-1)
	}()
}

// cancelStatus is the status of a run stopped by its timeout or by ctx.
func cancelStatus(ctx context.Context, timedOut bool) Status {
	if timedOut || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StatusTimeout
	}
	return StatusInterrupted
}

// cancelError says why the run stopped: the facts, not what they mean for
// the caller's state (Result.Discarded says whether the instance is gone).
func cancelError(ctx context.Context, timedOut, killed bool) *GuestError {
	var msg string
	if timedOut || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "execution timed out"
	} else {
		msg = "execution interrupted"
	}
	if killed {
		msg += "; the code did not stop within the interrupt grace and was killed"
	}
	return &GuestError{Type: "InterruptError", Message: msg}
}

func sandboxError(msg string) Result {
	return Result{Status: StatusError, Error: &GuestError{Type: "SandboxError", Message: msg}}
}

// crashError is a trap of the guest, as the client sees it: the first
// line of wazero's message and what it means. The wasm stack trace names
// the interpreter's C functions, not the user's code: it goes to the log
// (the caller logs err), not to the client.
func crashError(err error) *GuestError {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return &GuestError{Type: "SandboxCrash", Message: "the sandbox crashed (" + msg + "); its state is lost and the next call starts a new interpreter"}
}
