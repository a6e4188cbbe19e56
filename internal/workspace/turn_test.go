package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// startWait starts a "wait" run in a goroutine and waits until it runs.
func startWait(t *testing.T, m *Manager, f *fakeFactory, principal, id, tag string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(context.Background(), Request{Principal: principal, Workspace: id, Language: "js", Code: "wait " + tag})
		done <- err
	}()
	if got := <-f.started; got != "wait "+tag {
		t.Fatalf("started %q, want %q", got, "wait "+tag)
	}
	return done
}

func TestQueueFIFO(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")

	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		s := newSink()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: fmt.Sprintf("set k %d", i), Sink: s})
		}()
		// Enqueue one at a time: wait until this call reports it is queued.
		if msg := <-s.ch; !strings.HasPrefix(msg, "queued: workspace w is busy") {
			t.Fatalf("progress %q", msg)
		}
	}
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want := "wait 0|set k 1|set k 2|set k 3|set k 4|set k 5"
	if got := strings.Join(f.order, "|"); got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}

func TestCancelWhileQueued(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")

	ctx, cancel := context.WithCancel(context.Background())
	s := newSink()
	done := make(chan error, 1)
	go func() {
		out, err := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set never 1", Sink: s})
		if out.Workspace != "w" {
			err = fmt.Errorf("outcome workspace %q", out.Workspace)
		}
		done <- err
	}()
	<-s.ch // queued
	cancel()
	// It returns while the first call still holds the workspace.
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued call: %v", err)
	}
	f.release <- struct{}{}
	<-first
	if got := run(t, m, "p", "w", "get never"); got.Result.Value != nil {
		t.Error("the cancelled call ran")
	}
	if len(s.messages()) != 1 {
		t.Errorf("progress: %q, want one queued message", s.messages())
	}
}

func TestCancelRaceHandsTurnOn(t *testing.T) {
	// A queued call cancelled in the instant the turn is handed to it must
	// pass the turn on. The test holds the Manager's lock while it cancels
	// and hands the turn over, as releaseTurn does: in even rounds the
	// cancel comes first, so the waiter wakes for its cancel and then finds
	// the turn handed to it; in odd rounds the hand-over usually wins
	// (a waiter not yet parked sees both and select picks). A lost turn
	// leaves the workspace busy, which the check after each round reports
	// (it never hangs).
	m := newTestManager(t, Config{}, newFakeFactory())
	w, err := m.ref("p", "w", true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.unref(w)
	for i := range 300 {
		if err := m.acquireTurn(context.Background(), w, &queued{}, true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- m.acquireTurn(ctx, w, &queued{}, true) }()
		for {
			m.mu.Lock()
			n := w.waiters.Len()
			m.mu.Unlock()
			if n == 1 {
				break
			}
			time.Sleep(10 * time.Microsecond)
		}
		m.mu.Lock()
		if i%2 == 0 {
			cancel()
		}
		wt := w.waiters.Remove(w.waiters.Front()).(*waiter)
		wt.handed = true
		close(wt.ready)
		cancel()
		m.mu.Unlock()
		if err := <-got; err == nil {
			m.releaseTurn(w) // it took the turn: give it back
		}
		m.mu.Lock()
		busy, active := w.busy, m.active
		m.mu.Unlock()
		if busy || active != 0 {
			t.Fatalf("round %d: after the race the workspace is busy=%v with %d turns held; the turn was lost", i, busy, active)
		}
	}

	// The same through Run, under a synctest bubble: a stalled queue leaves
	// every goroutine blocked, synctest.Wait returns, and the check fails.
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(Config{DataDir: t.TempDir()}, newFakeFactory(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		for i := range 200 {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{}, 2)
			go func() {
				m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: "set a 1"})
				done <- struct{}{}
			}()
			go func() {
				m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set b 1"})
				done <- struct{}{}
			}()
			if i%2 == 0 {
				cancel()
			}
			synctest.Wait()
			if len(done) != 2 {
				t.Fatalf("iteration %d: %d of 2 calls returned; the turn was lost", i, len(done))
			}
			cancel()
		}
	})
}

func TestHammerOneWorkspace(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 4}, f)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				out, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: fmt.Sprintf("set g%d %d", g, i)})
				if err != nil || out.Result.Status != StatusOK {
					t.Errorf("run: %v %+v", err, out.Result)
				}
			}
		}()
	}
	wg.Wait()
	if got := f.maxRunning.Load(); got != 1 {
		t.Errorf("max concurrent runs in one workspace = %d, want 1", got)
	}
	if f.made != 1 {
		t.Errorf("runners made = %d, want 1", f.made)
	}
}

func TestHammerManyWorkspacesBounded(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 3, MaxWorkspaces: 5}, f)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				id := fmt.Sprintf("w%d", (g+i)%10)
				if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "set a 1"}); err != nil {
					t.Error(err)
				}
				if i%7 == 0 {
					m.List("p")
				}
				if i%13 == 0 {
					m.Reset(context.Background(), "p", id, false)
				}
			}
		}()
	}
	wg.Wait()
	if got := f.maxRunning.Load(); got > 3 {
		t.Errorf("max concurrent runs = %d, want <= 3", got)
	}
	if got := f.liveCount(); got > 5 {
		t.Errorf("live runners = %d, want <= 5", got)
	}
}

func TestConcurrencyCapQueues(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 1}, f)
	first := startWait(t, m, f, "p", "a", "a")

	s := newSink()
	done := make(chan Outcome, 1)
	go func() {
		out, _ := m.Run(context.Background(), Request{Principal: "p", Workspace: "b", Language: "js", Code: "set x 1", Sink: s})
		done <- out
	}()
	if msg := <-s.ch; msg != "queued: all 1 run slots are busy; waiting for one" {
		t.Fatalf("progress %q", msg)
	}
	select {
	case <-done:
		t.Fatal("second workspace ran past the cap")
	default:
	}
	f.release <- struct{}{}
	<-first
	if out := <-done; out.Result.Status != StatusOK {
		t.Errorf("queued run: %+v", out.Result)
	}
}
