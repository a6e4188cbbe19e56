package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Worker is one sandbox: an instance of one guest that keeps its
// interpreter state from Run to Run. Run and Close are serialised by the
// worker itself; Close waits for a Run in progress (cancel its ctx first).
type Worker struct {
	e    *Engine
	lang string
	opts WorkerOptions

	mu     sync.Mutex
	inst   *instance // nil after a kill or crash, until the next Run
	lost   bool      // state was lost and no Run has said so yet
	closed bool
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
	if w.inst != nil {
		w.inst.close()
		w.inst = nil
	}
	return nil
}

// Run evaluates code as the next cell of the worker's session.
//
// When ctx ends, the guest is asked to stop (a soft interrupt that keeps
// its state); if it has not returned after the engine's InterruptGrace, the
// instance is killed and replaced, and the Result says Reset. The status is
// timeout when ctx's deadline passed, interrupted for any other
// cancellation. A guest crash also replaces the instance. Run never panics
// on guest behaviour; sink, if not nil, receives the guest's progress calls
// on the goroutine running the guest.
func (w *Worker) Run(ctx context.Context, code string, sink ProgressSink) Result {
	start := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	res := w.run(ctx, code, sink)
	res.Duration = time.Since(start)
	return res
}

func (w *Worker) run(ctx context.Context, code string, sink ProgressSink) Result {
	if w.closed || w.e.isClosed() {
		return sandboxError("the worker is closed", false)
	}
	if err := ctx.Err(); err != nil {
		return Result{Status: cancelStatus(ctx), Error: cancelError(ctx, false)}
	}
	if w.inst == nil {
		inst, err := w.e.instantiate(ctx, w.lang, w.opts)
		if err != nil {
			w.e.log.Error("instance replacement failed", zap.String("language", w.lang), zap.Error(err))
			return sandboxError("could not start a fresh sandbox: "+err.Error(), true)
		}
		w.inst = inst
	}
	inst := w.inst
	reset := w.lost
	w.lost = false

	max := w.e.cfg.MaxOutputBytes
	stdout, stderr := newBoundedBuffer(max), newBoundedBuffer(max)
	inst.stdout.swap(stdout)
	inst.stderr.swap(stderr)

	st := &runState{sink: sink}
	callCtx := context.WithValue(context.WithoutCancel(ctx), runKey{}, st)
	done := make(chan outcome, 1)
	go func() {
		env, err := inst.evalCall(callCtx, code)
		done <- outcome{env, err}
	}()

	var out outcome
	killed, abandoned := false, false
	select {
	case out = <-done:
	case <-ctx.Done():
		st.interrupt.Store(true)
		grace := time.NewTimer(w.e.cfg.InterruptGrace)
		select {
		case out = <-done:
			grace.Stop()
		case <-grace.C:
			killed = true
			st.kill.Store(true) // with the kill switch the guest traps within microseconds
			wait := time.NewTimer(killWait)
			if !w.e.cfg.StrictTermination {
				wait.Reset(0)
			}
			select {
			case out = <-done:
				wait.Stop()
			case <-wait.C:
				abandoned = true
			}
		}
	}

	// Detach the buffers and the sink: an abandoned guest may go on.
	st.finished.Store(true)
	inst.stdout.swap(nil)
	inst.stderr.swap(nil)
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	res.Truncated = stdout.Truncated() || stderr.Truncated()

	switch {
	case killed:
		w.drop(inst, abandoned, done)
		res.Status = cancelStatus(ctx)
		res.Error = cancelError(ctx, true)
		res.Reset = true
		w.e.log.Info("sandbox killed after the interrupt grace", zap.String("language", w.lang), zap.Bool("abandoned", abandoned))
		return res
	case out.err != nil:
		w.drop(inst, false, done)
		res.Status = StatusError
		res.Error = &GuestError{Type: "SandboxCrash", Message: crashMessage(out.err)}
		res.Reset = true
		w.e.log.Warn("sandbox crashed", zap.String("language", w.lang), zap.Error(out.err))
		return res
	}

	env := out.env
	res.Error = env.Error
	if env.Value != nil {
		v, cut := truncateString(*env.Value, max)
		res.Value = &v
		res.Truncated = res.Truncated || cut
	}
	switch env.Status {
	case "ok":
		res.Status = StatusOK
	case "error":
		res.Status = StatusError
	case "oom":
		res.Status = StatusOOM
	case "interrupted":
		if ctx.Err() != nil {
			res.Status = cancelStatus(ctx)
			res.Error = cancelError(ctx, false)
		} else {
			res.Status = StatusError
		}
	default:
		res.Status = StatusError
		res.Error = &GuestError{Type: "SandboxError", Message: fmt.Sprintf("guest returned unknown status %q", env.Status)}
	}
	if reset {
		res.Reset = true
		if res.Status == StatusOK {
			res.Status = StatusReset
		}
	}
	return res
}

// outcome is what the goroutine running a guest call hands back.
type outcome struct {
	env *envelope
	err error
}

// drop forgets the current instance after a kill or crash; the next Run
// starts a fresh one. An abandoned instance (its call still running) is
// closed when the call returns, if ever.
func (w *Worker) drop(inst *instance, abandoned bool, done <-chan outcome) {
	w.inst = nil
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

func cancelStatus(ctx context.Context) Status {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StatusTimeout
	}
	return StatusInterrupted
}

func cancelError(ctx context.Context, killed bool) *GuestError {
	var msg string
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "execution timed out"
	} else {
		msg = "execution interrupted"
	}
	if killed {
		msg += "; the code did not stop in time and the sandbox was reset (all state lost)"
	} else {
		msg += "; state is kept"
	}
	return &GuestError{Type: "InterruptError", Message: msg}
}

func sandboxError(msg string, reset bool) Result {
	return Result{Status: StatusError, Error: &GuestError{Type: "SandboxError", Message: msg}, Reset: reset}
}

func crashMessage(err error) string {
	return "the sandbox crashed and was reset (all state lost): " + err.Error()
}
