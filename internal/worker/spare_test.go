package worker

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// spareEngine is an engine of the test's own that keeps n spares per guest,
// returned once every pool is full.
func spareEngine(t testing.TB, n int) *Engine {
	t.Helper()
	cfg := testConfig(true)
	cfg.SpareInstances = n
	e := newTestEngine(t, cfg)
	for _, lang := range e.Languages() {
		waitSpares(t, e, lang, n)
	}
	return e
}

// waitSpares waits (at most 30 s) until lang's pool holds n spares.
func waitSpares(t testing.TB, e *Engine, lang string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); e.guests[lang].spares.len() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d spares after 30 s; want %d", lang, e.guests[lang].spares.len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// spareSet is the instances in lang's pool now.
func spareSet(e *Engine, lang string) map[*instance]bool {
	s := e.guests[lang].spares
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[*instance]bool{}
	for _, inst := range s.list {
		set[inst] = true
	}
	return set
}

func instanceOf(w *Worker) *instance {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inst
}

// A new worker is made from a spare and is what it would be without one:
// a clone of the base image with random numbers of its own, the worker's
// own /workspace, state that images and restores like any other.
func TestSparesServeNewWorkers(t *testing.T) {
	t.Parallel()
	e := spareEngine(t, 2)
	for _, lang := range e.Languages() {
		t.Run(lang, func(t *testing.T) {
			sc := stateCode[lang]
			spares := spareSet(e, lang)
			w := langWorker(t, e, lang, WorkerOptions{})
			if !spares[instanceOf(w)] {
				t.Fatal("the new worker was not made from a spare")
			}
			mustRun(t, w, sc.set, StatusOK)
			img := snapshot(t, w)
			hash := memHash(t, w)
			w2 := restore(t, e, img, false)
			if memHash(t, w2) != hash {
				t.Error("the restored worker's memory differs from the snapshot of the spare-made one")
			}
			if r := mustRun(t, w2, sc.get, StatusOK); value(r) != sc.want {
				t.Errorf("restored %s = %s; want %s", sc.get, describe(r), sc.want)
			}

			waitSpares(t, e, lang, 2)
			if x, y := twoNewDraws(t, e, lang); x == y {
				t.Errorf("two workers made from spares drew the same %s", x)
			}
		})
	}
	if contains(e.Languages(), "python") {
		// A spare is made before its workspace is known: the guest sees the
		// worker's directory at /workspace all the same.
		waitSpares(t, e, "python", 2)
		spares := spareSet(e, "python")
		dir := t.TempDir()
		w := langWorker(t, e, "python", WorkerOptions{Dir: dir})
		if !spares[instanceOf(w)] {
			t.Fatal("the new worker was not made from a spare")
		}
		mustRun(t, w, "open('/workspace/note.txt', 'w').write('from a spare')", StatusOK)
		if b, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(b) != "from a spare" {
			t.Errorf("the file the guest wrote: %q, %v; want %q in the worker's directory", b, err, "from a spare")
		}
	}
}

// Spares give way: memory a worker needs is never refused while spares
// hold it, and the pools fill again afterwards. Closing the engine closes
// them.
func TestSparesGiveWayToTheBudget(t *testing.T) {
	t.Parallel()
	e := spareEngine(t, 2)
	held := e.MemoryBytes()
	if held <= 0 {
		t.Fatalf("the engine holds %d bytes with full pools; want the spares counted", held)
	}
	room := e.MemoryBudget() - held
	if err := e.budget.check(room + 1); err != nil {
		t.Fatalf("check of %d bytes, which fit without the spares: %v", room+1, err)
	}
	if got := e.MemoryBytes(); got != 0 {
		t.Errorf("after the spill the engine holds %d bytes; want 0 (no worker)", got)
	}
	for _, lang := range e.Languages() {
		if n := e.guests[lang].spares.len(); n != 0 {
			t.Errorf("%s: %d spares after the spill; want 0", lang, n)
		}
		w := langWorker(t, e, lang, WorkerOptions{})
		mustRun(t, w, "1+1", StatusOK)
		waitSpares(t, e, lang, 2) // asking for one fills the pool again
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.MemoryBytes(); got != 0 {
		t.Errorf("the closed engine holds %d bytes; want 0", got)
	}
}

// The pages a first call touches are learned from a probe, and faulting
// them into a clone changes none of its bytes.
func TestPrefaultChangesNoByte(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	for _, lang := range e.Languages() {
		t.Run(lang, func(t *testing.T) {
			g := e.guests[lang]
			if g.base == nil {
				t.Fatalf("the %s guest has no base image", lang)
			}
			hot := e.learnFirstCall(g)
			if runtime.GOOS == "linux" && len(hot.written) == 0 {
				t.Fatal("no written page learned from the probe's first call")
			}
			w := langWorker(t, e, lang, WorkerOptions{})
			before := memHash(t, w)
			w.mu.Lock()
			prefault(w.inst.mem.bytes(), hot)
			w.mu.Unlock()
			if memHash(t, w) != before {
				t.Error("prefault changed the memory")
			}
			if runtime.GOOS == "linux" {
				w.mu.Lock()
				after, err := touchedPages(w.inst.mem.bytes())
				w.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				if pages(after.written) < pages(hot.written) {
					t.Errorf("%d pages are the clone's own after prefault; want at least the %d learned", pages(after.written), pages(hot.written))
				}
			}
			mustRun(t, w, "1+1", StatusOK)
		})
	}
}

func pages(runs []pageRun) int {
	n := 0
	for _, r := range runs {
		n += int(r.count)
	}
	return n
}

// A spare whose build began before a spill is not kept: the memory the
// spill was asked for is not held by it afterwards.
func TestSpareBuiltAcrossASpillIsGivenUp(t *testing.T) {
	t.Parallel()
	e := spareEngine(t, 1)
	lang := e.Languages()[0]
	g := e.guests[lang]
	e.spill()
	if e.MemoryBytes() != 0 {
		t.Fatalf("after the spill the engine holds %d bytes; want 0", e.MemoryBytes())
	}
	e.spareBuild.Lock() // keepSpares must not build meanwhile
	defer e.spareBuild.Unlock()
	gen := e.spills.Load()
	inst, err := e.restoreInstance(context.Background(), g, g.base.img, g.base, WorkerOptions{}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	e.spills.Add(1) // what spill does first, while this build runs
	if e.keepSpare(g, inst, gen) {
		t.Fatal("a spare built across a spill was kept")
	}
	if n, held := g.spares.len(), e.MemoryBytes(); n != 0 || held != 0 {
		t.Errorf("%d spares, %d bytes held after the build gave up; want 0, 0", n, held)
	}
	inst2, err := e.restoreInstance(context.Background(), g, g.base.img, g.base, WorkerOptions{}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !e.keepSpare(g, inst2, e.spills.Load()) || g.spares.len() != 1 {
		t.Error("a spare built without a spill was not kept")
	}
}
