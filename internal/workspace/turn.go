package workspace

import (
	"context"
	"errors"
	"fmt"
)

// The turn: one call (or the Manager's own work: hibernation, expiry) at a
// time holds a workspace, the others wait in arrival order and may give up.

// waiter is a call waiting for a workspace's turn.
type waiter struct {
	ready  chan struct{}
	handed bool // the turn was handed to this waiter
}

// queued reports the first wait of one call through its sink.
type queued struct {
	sink ProgressSink
	done bool
}

func (q *queued) report(msg string) {
	if q.done || q.sink == nil {
		return
	}
	q.done = true
	q.sink.Progress(0, 0, "queued: "+msg)
}

// acquireTurn waits, FIFO, until w is free, ctx ends or the Manager drains.
// A waiter that gives up leaves the queue at once.
func (m *Manager) acquireTurn(ctx context.Context, w *ws, q *queued, run bool) error {
	m.mu.Lock()
	if !w.busy {
		m.takeTurnLocked(w)
		m.mu.Unlock()
		return nil
	}
	wt := &waiter{ready: make(chan struct{})}
	e := w.waiters.PushBack(wt)
	ahead := w.waiters.Len()
	m.mu.Unlock()

	q.report(fmt.Sprintf("workspace %s is busy with another call (%d ahead)", w.key.id, ahead))
	var err error
	select {
	case <-wt.ready:
		m.mu.Lock()
		draining := m.draining
		m.mu.Unlock()
		if !draining {
			return nil
		}
		m.releaseTurn(w)
		return closedError(run)
	case <-ctx.Done():
		err = ctx.Err()
	case <-m.drained:
		err = closedError(run)
	}
	m.mu.Lock()
	if wt.handed { // lost the race: the turn is ours, pass it on
		m.mu.Unlock()
		m.releaseTurn(w)
	} else {
		w.waiters.Remove(e)
		m.mu.Unlock()
	}
	return err
}

// tryTurnLocked takes w's turn if it is free, for work of the Manager's own
// (hibernation, expiry). Callers hold m.mu and release with releaseTurn.
func (m *Manager) tryTurnLocked(w *ws) bool {
	if w.busy {
		return false
	}
	m.takeTurnLocked(w)
	return true
}

// takeTurnLocked marks w busy; m.mu is held.
func (m *Manager) takeTurnLocked(w *ws) {
	w.busy = true
	m.active++
	m.forgetRootLocked(w)
}

// IdleRootsKept is how many idle workspaces keep the descriptor their file
// system resolves paths through: a workspace in use again soon starts its
// turn without opening its directory, and the idle ones of a daemon with
// thousands of workspaces hold no more than this many descriptors.
const IdleRootsKept = 64

// keepRootLocked lets w, now idle, keep its root open; beyond IdleRootsKept
// the least recently used idle workspace's root is closed. m.mu is held,
// so no turn can begin on that workspace while its root closes.
func (m *Manager) keepRootLocked(w *ws) {
	m.forgetRootLocked(w)
	w.idleRoot = m.idleRoots.PushFront(w)
	for m.idleRoots.Len() > IdleRootsKept {
		old := m.idleRoots.Remove(m.idleRoots.Back()).(*ws)
		old.idleRoot = nil
		if old.disk != nil {
			old.disk.Release()
		}
	}
}

// forgetRootLocked takes w out of idleRoots (its root stays as it is);
// m.mu is held.
func (m *Manager) forgetRootLocked(w *ws) {
	if w.idleRoot != nil {
		m.idleRoots.Remove(w.idleRoot)
		w.idleRoot = nil
	}
}

// releaseTurn hands the turn to the next waiter or frees the workspace; a
// workspace left free keeps its root open while it is among the
// IdleRootsKept most recently used (keepRootLocked).
func (m *Manager) releaseTurn(w *ws) {
	m.settlePackages(w)
	m.mu.Lock()
	if e := w.waiters.Front(); e != nil {
		wt := w.waiters.Remove(e).(*waiter)
		wt.handed = true
		close(wt.ready)
		m.mu.Unlock()
		return // active count carries over to the next holder
	}
	w.busy = false
	m.active--
	m.signalIdleLocked()
	over := m.overLimitLocked()
	if w.disk != nil {
		m.keepRootLocked(w)
	}
	m.mu.Unlock()
	if over {
		select {
		case m.overLimit <- struct{}{}:
		default: // the shedder has been told already
		}
	}
}

func (m *Manager) signalIdleLocked() {
	if m.closed && m.active == 0 {
		select {
		case <-m.idle:
		default:
			close(m.idle)
		}
	}
}

// errAsking ends a wait for a turn held by a run whose code waits for
// input (turnUnlessAsking).
var errAsking = errors.New("the workspace's code waits for input")

// askingLocked returns a channel closed once a run of w waits for input
// (at once if one does). m.mu is held.
func (m *Manager) askingLocked(w *ws) <-chan struct{} {
	if w.askWake == nil {
		w.askWake = make(chan struct{})
		if w.asking {
			close(w.askWake)
		}
	}
	return w.askWake
}

// setAsking notes that w's run waits for input (or no longer does), and
// wakes what gives up on that (turnUnlessAsking).
func (m *Manager) setAsking(w *ws, asking bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.asking = asking
	if w.askWake == nil {
		return
	}
	select {
	case <-w.askWake:
		if !asking {
			w.askWake = nil // closed: the next wait gets a fresh one
		}
	default:
		if asking {
			close(w.askWake)
		}
	}
}

// withTurn runs op holding the turn of an existing workspace: one known in
// memory with runners, or with a directory on disk.
func (m *Manager) withTurn(ctx context.Context, principal, id string, op func(w *ws) error) error {
	return m.turn(ctx, principal, id, true, op)
}

// turn runs op holding the turn of the workspace; with mustExist, only of
// an existing one (NotFound otherwise).
func (m *Manager) turn(ctx context.Context, principal, id string, mustExist bool, op func(w *ws) error) error {
	return m.turnUnlessAsking(ctx, principal, id, mustExist, nil, op)
}

// turnUnlessAsking is turn for an operation that must not wait for a run
// whose code waits for input (up to protocol.input_timeout): while that
// holds the turn, or once it starts waiting, asking (unless nil) is called
// instead of op, with a reference to w but without its turn.
func (m *Manager) turnUnlessAsking(ctx context.Context, principal, id string, mustExist bool, asking, op func(w *ws) error) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	w, err := m.ref(principal, id, false)
	if err != nil {
		return err
	}
	defer m.unref(w)
	wait := ctx
	if asking != nil {
		var cancel context.CancelCauseFunc
		wait, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		m.mu.Lock()
		wake := m.askingLocked(w)
		m.mu.Unlock()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-wake:
				cancel(errAsking)
			case <-stop:
			}
		}()
	}
	if err := m.acquireTurn(wait, w, &queued{}, false); err != nil {
		if errors.Is(context.Cause(wait), errAsking) && ctx.Err() == nil {
			return asking(w)
		}
		return err
	}
	defer m.releaseTurn(w)
	m.mu.Lock()
	hasRunners := len(w.runners) > 0
	m.mu.Unlock()
	if mustExist && !hasRunners && !onDisk(w) {
		return &Error{Code: NotFound, Msg: fmt.Sprintf("workspace %q does not exist", id)}
	}
	return op(w)
}
