package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// bombCode, per language: code that allocates far beyond 64 MiB, keeping
// all of it.
var bombCode = map[string]string{
	"javascript": "globalThis.hog = []; for (;;) hog.push(new Uint8Array(1 << 20).fill(1))",
	"python":     "hog = []\nwhile True: hog.append(bytearray(1 << 20))",
}

// Growth beyond the engine-wide budget fails inside the guest: out of
// memory, the worker still usable; a new worker that does not fit is
// refused with ErrMemoryBudget; freeing makes room again.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	cfg := testConfig(true)
	cfg.TotalMemoryMiB = 64
	e := newTestEngine(t, cfg)
	for _, lang := range e.Languages() {
		t.Run(lang, func(t *testing.T) {
			w := langWorker(t, e, lang, WorkerOptions{})
			mustRun(t, w, stateCode[lang].set, StatusOK)
			r := w.Run(context.Background(), bombCode[lang], RunOptions{})
			if r.Status != StatusOOM || !r.BudgetExceeded || r.Discontinuous() {
				t.Fatalf("bomb under a 64 MiB budget: %s (budget exceeded %v)", describe(r), r.BudgetExceeded)
			}
			if e.MemoryBytes() > e.MemoryBudget() {
				t.Errorf("engine holds %d bytes, over its budget of %d", e.MemoryBytes(), e.MemoryBudget())
			}
			if r := mustRun(t, w, stateCode[lang].get, StatusOK); value(r) != stateCode[lang].want {
				t.Errorf("state after the budget's oom: %s", describe(r))
			}
			if _, err := e.NewWorker(context.Background(), lang, WorkerOptions{}); !errors.Is(err, ErrMemoryBudget) {
				t.Errorf("NewWorker with the budget full: %v; want ErrMemoryBudget", err)
			}
			w.Close()
			w2 := langWorker(t, e, lang, WorkerOptions{})
			mustRun(t, w2, "1+1", StatusOK)
			w2.Close()
		})
	}
}

// A running guest's growth that the budget cannot hold asks the reclaim
// hook for room (the workspace registry hibernates idle interpreters), and
// grows when the hook freed enough.
func TestMemoryBudgetReclaim(t *testing.T) {
	t.Parallel()
	cfg := testConfig(true)
	cfg.TotalMemoryMiB = 96
	e := newTestEngine(t, cfg)
	const lang = "javascript"
	hold := "globalThis.held = []; for (let i = 0; i < 56; i++) held.push(new Uint8Array(1 << 20).fill(1)); held.length"
	idle := langWorker(t, e, lang, WorkerOptions{})
	mustRun(t, idle, hold, StatusOK)
	busy := langWorker(t, e, lang, WorkerOptions{})
	var asked atomic.Int64
	e.SetReclaim(func(need int64) int64 {
		asked.Add(1)
		before := e.MemoryBytes()
		idle.Close() // what hibernating the idle interpreter frees
		return before - e.MemoryBytes()
	})
	defer e.SetReclaim(nil)
	if r := mustRun(t, busy, hold, StatusOK); value(r) != "56" || r.BudgetExceeded {
		t.Fatalf("growth with an idle interpreter to reclaim: %s (budget exceeded %v)", describe(r), r.BudgetExceeded)
	}
	if asked.Load() == 0 {
		t.Fatal("the reclaim hook was never asked")
	}
	if e.MemoryBytes() > e.MemoryBudget() {
		t.Errorf("engine holds %d bytes, over its budget of %d", e.MemoryBytes(), e.MemoryBudget())
	}
	// Nothing left to reclaim: the growth fails inside the guest, as before.
	e.SetReclaim(func(int64) int64 { return 0 })
	if r := busy.Run(context.Background(), bombCode[lang], RunOptions{}); r.Status != StatusOOM || !r.BudgetExceeded {
		t.Fatalf("bomb with nothing to reclaim: %s", describe(r))
	}
}
