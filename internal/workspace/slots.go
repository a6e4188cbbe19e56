package workspace

import (
	"container/list"
	"context"
	"fmt"
	"runtime"
	"sync"
)

// runSlots admits runs: at most max in flight, at most perPrincipal of
// them for one principal, except that a principal with nothing in flight
// is always let in (RATIONALE.md, "How are run slots shared between
// principals?"). Waiters are served fewest-runs-in-flight first, then in
// arrival order.
type runSlots struct {
	max, perPrincipal int

	mu    sync.Mutex
	used  int
	by    map[string]int // runs in flight per principal
	queue *list.List     // of *slotWaiter
}

type slotWaiter struct {
	principal string
	ready     chan struct{}
	granted   bool
}

// newRunSlots makes the admission of Config.MaxConcurrentRuns and
// Config.MaxRunsPerPrincipal (zero values as documented there).
func newRunSlots(max, perPrincipal int) *runSlots {
	if max <= 0 {
		max = runtime.NumCPU()
	}
	if perPrincipal <= 0 || perPrincipal > max {
		perPrincipal = max
	}
	return &runSlots{max: max, perPrincipal: perPrincipal, by: map[string]int{}, queue: list.New()}
}

// admitsLocked reports whether principal p may start a run now.
func (s *runSlots) admitsLocked(p string) bool {
	n := s.by[p]
	return n == 0 || s.used < s.max && n < s.perPrincipal
}

func (s *runSlots) takeLocked(p string) {
	s.used++
	s.by[p]++
}

// acquire waits for a slot for principal p until ctx ends or drained is
// closed, reporting the first wait through q.
func (s *runSlots) acquire(ctx context.Context, p string, q *queued, drained <-chan struct{}) error {
	s.mu.Lock()
	// Every waiter in the queue is one that may not start now (grantLocked
	// admits the others as soon as they may), so a call that may start
	// overtakes nobody who could have used the slot.
	if s.admitsLocked(p) {
		s.takeLocked(p)
		s.mu.Unlock()
		return nil
	}
	wt := &slotWaiter{principal: p, ready: make(chan struct{})}
	e := s.queue.PushBack(wt)
	msg := fmt.Sprintf("all %d run slots are busy; waiting for one", s.max)
	if s.used < s.max {
		msg = fmt.Sprintf("%d of your runs are in flight, the most one caller may have; waiting for one to end", s.by[p])
	}
	s.mu.Unlock()

	q.report(msg)
	var err error
	select {
	case <-wt.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-drained:
		err = ErrClosed
	}
	s.mu.Lock()
	if wt.granted { // granted in the same instant: give it back
		s.mu.Unlock()
		s.release(p)
		return err
	}
	s.queue.Remove(e)
	s.mu.Unlock()
	return err
}

// inUse reports the slots taken and their number.
func (s *runSlots) inUse() (used, max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.max
}

// release ends one run of principal p and admits waiters.
func (s *runSlots) release(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.by[p]--; s.by[p] <= 0 {
		delete(s.by, p)
	}
	s.grantLocked()
}

// grantLocked admits every waiter that may start now, the one whose
// principal has the fewest runs in flight first (arrival order among
// equals).
func (s *runSlots) grantLocked() {
	for {
		var best *list.Element
		bestN := 0
		for e := s.queue.Front(); e != nil; e = e.Next() {
			wt := e.Value.(*slotWaiter)
			if !s.admitsLocked(wt.principal) {
				continue
			}
			if n := s.by[wt.principal]; best == nil || n < bestN {
				best, bestN = e, n
			}
		}
		if best == nil {
			return
		}
		wt := s.queue.Remove(best).(*slotWaiter)
		wt.granted = true
		s.takeLocked(wt.principal)
		close(wt.ready)
	}
}
