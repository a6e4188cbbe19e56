//go:build !linux

package worker

import "fmt"

// Outside Linux the memory is an ordinary Go slice of the largest size
// (the operating system commits its pages as they are first written), and
// base images are copied rather than mapped: correct, without the sharing.

func reserve(n uint64) ([]byte, error) { return make([]byte, n), nil }

func commit([]byte) error { return nil }

func release([]byte) {}

type sharedPages struct{ b []byte }

func newSharedPages(size uint64, fill func([]byte)) (*sharedPages, error) {
	sp := &sharedPages{b: make([]byte, size)}
	fill(sp.b)
	return sp, nil
}

func (sp *sharedPages) bytes() []byte { return sp.b }

func (sp *sharedPages) close() { sp.b = nil }

func (m *linearMemory) mapShared(sp *sharedPages, n uint64) error {
	if n > m.size.Load() || n > uint64(len(sp.b)) {
		return fmt.Errorf("map %d shared bytes: memory has %d, base %d", n, m.size.Load(), len(sp.b))
	}
	copy(m.mem[:n], sp.b[:n])
	return nil
}

func (m *linearMemory) zero(from, to uint64) error {
	if to > from {
		clear(m.mem[from:to])
	}
	return nil
}

// executableMemory: elsewhere wazero's own probe decides, and execd does
// not second-guess it.
func executableMemory() bool { return true }
