package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTrimAndSnapshotDuringEngineClose: a Trim or a Snapshot that overlaps
// the engine's Close neither crashes nor reads freed memory (Close frees
// the instances' memory and unmaps the base images), and once Close has
// begun neither starts. The closes fall at different points of a loop of
// trims and snapshots, with the base pages read again before each trim so
// that every trim has pages to drop.
func TestTrimAndSnapshotDuringEngineClose(t *testing.T) {
	cfg := testConfig(true)
	cfg.SpareInstances = 0 // nothing else at work in the engine
	for i := range 6 {
		e := startEngine(t, cfg)
		lang := "python"
		if !contains(e.Languages(), lang) {
			lang = "javascript"
		}
		w, err := e.NewWorker(context.Background(), lang, WorkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := w.Run(context.Background(), "x = 1", RunOptions{}); r.Status != StatusOK {
			t.Fatal(describe(r))
		}
		w.mu.Lock()
		base := w.inst.mem.bytes()[:len(w.inst.parent.shared.bytes())]
		w.mu.Unlock()
		var closed atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !closed.Load() {
				// ENOMEM once Close has unmapped the memory: nothing to read.
				_ = unix.Madvise(base, unix.MADV_POPULATE_READ)
				w.mu.Lock()
				w.touched = true
				w.mu.Unlock()
				w.Trim()
				w.Snapshot(context.Background())
			}
		}()
		time.Sleep(time.Duration(i%6) * 400 * time.Microsecond)
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		closed.Store(true)
		<-done
		w.mu.Lock()
		w.touched = true
		w.mu.Unlock()
		if n := w.Trim(); n != 0 {
			t.Errorf("a trim after Close freed %d bytes", n)
		}
		if _, err := w.Snapshot(context.Background()); !errors.Is(err, ErrNotSnapshottable) {
			t.Errorf("a snapshot after Close: %v", err)
		}
		w.Close()
	}
}
