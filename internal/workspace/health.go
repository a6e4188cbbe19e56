package workspace

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// fdWatch counts and logs failures to open files because the process is out
// of file descriptors, and turns them into an error the client can read.
type fdWatch struct {
	log     *zap.Logger
	count   atomic.Int64
	last    atomic.Int64 // unix nanoseconds of the last one
	lastLog atomic.Int64
}

// check returns an *Error (code Exhausted) when err is descriptor
// exhaustion, nil otherwise.
func (f *fdWatch) check(err error) *Error {
	if !fdExhausted(err) {
		return nil
	}
	n := f.count.Add(1)
	now := time.Now().UnixNano()
	f.last.Store(now)
	if prev := f.lastLog.Load(); now-prev > int64(10*time.Second) && f.lastLog.CompareAndSwap(prev, now) {
		f.log.Error("out of file descriptors: calls are refused (raise the process limit, ulimit -n / LimitNOFILE)",
			zap.Int64("refusals", n), zap.Error(err))
	}
	return &Error{Code: Exhausted, Err: err,
		Msg: "execd has run out of file descriptors (the process limit); the code did not run. Try again shortly; if it persists, the operator must raise the limit (ulimit -n)."}
}

// fdExhausted reports whether err means the process or the system is out
// of file descriptors.
func fdExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Health is the Manager's view of its own condition, for health checks
// and metrics.
type Health struct {
	// FDExhaustions counts calls refused because the process was out of
	// file descriptors; LastFDExhaustion is when the last one was.
	FDExhaustions    int64
	LastFDExhaustion time.Time
	// Live counts live interpreters; MemoryBytes is what they hold.
	Live        int
	MemoryBytes int64
	// RunsInFlight counts the run slots taken now; RunSlots is their
	// number (Config.MaxConcurrentRuns, or its default).
	RunsInFlight, RunSlots int
}

// Health reports the Manager's condition.
func (m *Manager) Health() Health {
	h := Health{FDExhaustions: m.fds.count.Load()}
	if t := m.fds.last.Load(); t != 0 {
		h.LastFDExhaustion = time.Unix(0, t)
	}
	m.mu.Lock()
	h.Live = m.live
	h.MemoryBytes = m.memoryLocked()
	m.mu.Unlock()
	h.RunsInFlight, h.RunSlots = m.slots.inUse()
	return h
}

// memoryLocked is the memory of every live interpreter; m.mu is held. It
// is kept as a sum, not added up: every turn's end asks for it.
func (m *Manager) memoryLocked() int64 { return m.memory }

// setMemLocked records the memory of w's interpreter of lang and keeps the
// sum; m.mu is held.
func (m *Manager) setMemLocked(w *ws, lang string, b int64) {
	m.memory += b - w.mem[lang]
	w.mem[lang] = b
}

// forgetMemLocked drops w's interpreter of lang from the sum; m.mu is held.
func (m *Manager) forgetMemLocked(w *ws, lang string) {
	m.memory -= w.mem[lang]
	delete(w.mem, lang)
}
