package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
)

// startWaits starts n "wait" runs of principal in workspaces prefix0…, and
// returns their results; it does not wait for them to start.
func startWaits(m *Manager, principal, prefix string, n int) <-chan error {
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := m.Run(context.Background(), Request{Principal: principal, Workspace: fmt.Sprintf("%s%d", prefix, i), Language: "js", Code: "wait"})
			done <- err
		}()
	}
	return done
}

func TestOnePrincipalCannotStarveAnother(t *testing.T) {
	// Principal a's endless runs take every run slot; b's call is answered
	// while they still run. In a synctest bubble a b that waited forever
	// would leave every goroutine blocked and fail the check, not hang.
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, _ := NewManager(Config{DataDir: t.TempDir(), MaxConcurrentRuns: 2}, f, nil)
		defer m.Close(context.Background())
		aDone := startWaits(m, "a", "loop", 4)
		synctest.Wait()
		if got := f.running.Load(); got != 2 {
			t.Fatalf("a runs %d at once, want 2 (the slots)", got)
		}
		bDone := make(chan Outcome, 1)
		go func() {
			out, _ := m.Run(context.Background(), Request{Principal: "b", Workspace: "w", Language: "js", Code: "set x 2"})
			bDone <- out
		}()
		synctest.Wait()
		select {
		case out := <-bDone:
			if out.Result.Status != StatusOK {
				t.Errorf("b: %+v", out.Result)
			}
		default:
			t.Fatal("b was not answered while a's runs hold the slots")
		}
		if len(aDone) != 0 {
			t.Fatal("a's runs ended early")
		}
		for range 4 {
			f.release <- struct{}{}
		}
		for range 4 {
			if err := <-aDone; err != nil {
				t.Error(err)
			}
		}
	})
}

func TestRunsPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, _ := NewManager(Config{DataDir: t.TempDir(), MaxConcurrentRuns: 4, MaxRunsPerPrincipal: 2}, f, nil)
		defer m.Close(context.Background())
		aDone := startWaits(m, "a", "a", 2)
		synctest.Wait()
		s := newSink()
		third := make(chan error, 1)
		go func() {
			_, err := m.Run(context.Background(), Request{Principal: "a", Workspace: "a2", Language: "js", Code: "wait", Sink: s})
			third <- err
		}()
		synctest.Wait()
		if msgs := s.messages(); len(msgs) != 1 || !strings.Contains(msgs[0], "2 of your runs are in flight") {
			t.Errorf("a's third run: %q", msgs)
		}
		if got := f.running.Load(); got != 2 {
			t.Fatalf("running %d, want 2", got)
		}
		// b still gets a slot.
		bDone := startWaits(m, "b", "b", 1)
		synctest.Wait()
		if got := f.running.Load(); got != 3 {
			t.Fatalf("running %d, want 3", got)
		}
		f.release <- struct{}{} // one of the running ones ends…
		synctest.Wait()
		if got := f.running.Load(); got != 3 {
			t.Fatalf("running %d after one ended, want 3 (a's third started)", got)
		}
		for range 3 {
			f.release <- struct{}{}
		}
		for _, ch := range []<-chan error{aDone, aDone, bDone, third} {
			if err := <-ch; err != nil {
				t.Error(err)
			}
		}
	})
}

func TestSlotsGoToTheFewestInFlight(t *testing.T) {
	s := newRunSlots(2, 2)
	ctx := context.Background()
	s.acquire(ctx, "a", &queued{}, nil)
	s.acquire(ctx, "a", &queued{}, nil)
	s.acquire(ctx, "b", &queued{}, nil) // b has nothing in flight: let in beyond the cap
	order := make(chan string, 2)
	for _, p := range []string{"b", "a"} { // b queues first
		go func() {
			s.acquire(ctx, p, &queued{}, nil)
			order <- p
		}()
		for {
			s.mu.Lock()
			n := s.queue.Len()
			s.mu.Unlock()
			if n == map[string]int{"b": 1, "a": 2}[p] {
				break
			}
		}
	}
	s.release("a")
	s.release("b") // now a has 1 in flight, b none: a slot for both, b first
	if got := <-order; got != "b" {
		t.Errorf("first admitted: %s, want b (fewest in flight)", got)
	}
	s.release("b")
	if got := <-order; got != "a" {
		t.Errorf("second admitted: %s", got)
	}
}

func TestDrainTellsQueuedCallsAtOnce(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 1}, f)
	running := startWait(t, m, f, "p", "a", "r")
	sameWS, sameSink := make(chan error, 1), newSink()
	go func() {
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "a", Language: "js", Code: "set x 1", Sink: sameSink})
		sameWS <- err
	}()
	otherWS, otherSink := make(chan error, 1), newSink()
	go func() {
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "b", Language: "js", Code: "set x 1", Sink: otherSink})
		otherWS <- err
	}()
	reset := make(chan error, 1)
	<-sameSink.ch
	<-otherSink.ch
	go func() { reset <- m.Reset(context.Background(), "p", "a", false) }()
	for {
		m.mu.Lock()
		n := m.wss[key{"p", "a"}].waiters.Len()
		m.mu.Unlock()
		if n == 2 {
			break
		}
	}

	m.Drain()
	for name, ch := range map[string]chan error{"queued for the workspace": sameWS, "queued for a slot": otherWS} {
		err := <-ch
		if !errors.Is(err, ErrClosed) || err.Error() != "execd is shutting down; the code did not run" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := <-reset; !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("queued Reset: %v", err)
	}
	if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "c", Language: "js"}); !errors.Is(err, ErrClosed) {
		t.Errorf("new call after Drain: %v", err)
	}
	// The running call goes on to its end.
	select {
	case err := <-running:
		t.Fatalf("the running call ended on Drain: %v", err)
	default:
	}
	f.release <- struct{}{}
	if err := <-running; err != nil {
		t.Errorf("running call: %v", err)
	}
	for _, code := range f.order {
		if code == "set x 1" {
			t.Error("a drained call ran")
		}
	}
}
