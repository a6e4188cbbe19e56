package worker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// ErrMemoryBudget is matched by the error of NewWorker and Restore when the
// daemon-wide memory budget (Config.TotalMemoryMiB) cannot hold another
// instance of the size it needs. Growth of a running guest beyond the
// budget is not an error: memory.grow fails inside the guest, which
// reports out of memory (Result.BudgetExceeded).
var ErrMemoryBudget = errors.New("memory budget exhausted")

// budget is the daemon-wide cap on the linear memory of all instances.
// Every instance counts its whole linear memory, shared copy-on-write base
// pages included: a guest may write to all of them.
type budget struct {
	limit   int64 // bytes
	used    atomic.Int64
	reclaim atomic.Pointer[func(need int64) int64] // Engine.SetReclaim
	// spill closes the spare instances (spare.go) and waits for one being
	// built to give up: spares give way before anything else does. Set
	// before the first instance; nil in tests of the budget alone.
	spill func()
}

// grow reserves n bytes for a running guest's growth. When they do not fit,
// the spares are closed, then the reclaim hook (if any) is asked to free
// at least n bytes elsewhere — the workspace registry hibernates idle
// interpreters — and the reservation is tried again after each.
func (b *budget) grow(n int64) bool {
	if b.take(n, false) {
		return true
	}
	if b.spill != nil {
		b.spill()
		if b.take(n, false) {
			return true
		}
	}
	if f := b.reclaim.Load(); f != nil && (*f)(n) > 0 {
		return b.take(n, false)
	}
	return false
}

// take reserves n bytes; force takes them even beyond the limit (an
// instance's initial memory, which its caller checked beforehand).
func (b *budget) take(n int64, force bool) bool {
	for {
		u := b.used.Load()
		if !force && u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *budget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// check reports ErrMemoryBudget when n more bytes do not fit now, even
// without the spares.
func (b *budget) check(n int64) error {
	if b.used.Load()+n > b.limit && b.spill != nil {
		b.spill()
	}
	if u := b.used.Load(); u+n > b.limit {
		return fmt.Errorf("%w: %d MiB in use of %d MiB, %d MiB more needed",
			ErrMemoryBudget, u>>20, b.limit>>20, (n+(1<<20)-1)>>20)
	}
	return nil
}

// linearMemory backs one instance's wasm memory: a reservation of the
// largest size the memory may reach, of which the first size bytes are
// usable. It lives outside the Go heap (mmap), so growing never copies,
// the garbage collector never scans it, and a refused growth is
// memory.grow returning -1 inside the guest rather than the Go runtime's
// fatal "out of memory". On Linux its first pages can be a private mapping
// of a base image's shared pages (mapShared): copy-on-write, so pages a
// guest never writes are shared by every instance restored from that base.
type linearMemory struct {
	b       *budget
	mem     []byte        // the reservation
	size    atomic.Uint64 // usable bytes; read by MemoryBytes from any goroutine
	refused atomic.Int64  // growths the budget refused
	forced  bool          // the first allocation is taken even beyond the budget
	busy    *atomic.Int32 // the owner's calls in flight (instance.enter)
	// noReclaim: a growth beyond the budget fails instead of asking the
	// reclaim hook for room (a spare instance must not cost a workspace
	// its live interpreter). Cleared when the spare is bound.
	noReclaim bool
}

var _ experimental.LinearMemory = (*linearMemory)(nil)

// memoryAllocator hands wazero one linearMemory per instance; the
// instance's owner keeps a pointer to it through got.
type memoryAllocator struct {
	b         *budget
	busy      *atomic.Int32
	noReclaim bool // see linearMemory.noReclaim
	got       *linearMemory
}

func (a *memoryAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	mem, err := reserve(max)
	m := &linearMemory{b: a.b, mem: mem, forced: true, busy: a.busy, noReclaim: a.noReclaim}
	if err != nil {
		m.mem = nil // every Reallocate fails; instantiate reports it
	}
	a.got = m
	return m
}

// Reallocate implements experimental.LinearMemory: it makes the first size
// bytes usable, or returns nil when the budget or the reservation cannot
// hold them.
func (m *linearMemory) Reallocate(size uint64) []byte {
	cur := m.size.Load()
	if size > uint64(len(m.mem)) {
		return nil
	}
	if size > cur {
		delta := int64(size - cur)
		var ok bool
		switch {
		case m.forced:
			ok = m.b.take(delta, true)
		case m.noReclaim:
			ok = m.b.take(delta, false)
		default:
			ok = m.b.grow(delta)
		}
		if !ok {
			m.refused.Add(1)
			return nil
		}
		if err := commit(m.mem[cur:size]); err != nil {
			m.b.give(delta)
			m.refused.Add(1)
			return nil
		}
		m.size.Store(size)
	}
	m.forced = false
	return m.mem[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it when the
// module closes, which may happen while a call still runs in it (an
// abandoned guest when the engine closes): then the pages are replaced by
// zero pages instead of unmapped, so that the call faults on nothing, and
// the address range stays reserved.
func (m *linearMemory) Free() {
	if m.mem == nil {
		return
	}
	if m.busy != nil && m.busy.Load() > 0 {
		_ = m.zero(0, m.size.Load())
	} else {
		release(m.mem)
	}
	m.b.give(int64(m.size.Swap(0)))
	m.mem = nil
}

// bytes is the usable memory.
func (m *linearMemory) bytes() []byte { return m.mem[:m.size.Load()] }
