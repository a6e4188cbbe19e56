package worker

import (
	"fmt"
	"strings"
	"sync"
)

// boundedBuffer keeps at most limit bytes of a stream: its first half and a
// ring of its last half. A flood of any size costs limit bytes of memory;
// a quiet stream costs nothing (the ring is allocated on first use).
type boundedBuffer struct {
	headCap int
	ringCap int
	head    []byte // the first headCap bytes
	ring    []byte // the last ringCap bytes after head, circular
	rpos    int    // next write position in ring
	rlen    int64  // bytes ever written to ring
	total   int64
}

func newBoundedBuffer(limit int) *boundedBuffer {
	if limit < 2 {
		limit = 2
	}
	h := limit / 2
	return &boundedBuffer{headCap: h, ringCap: limit - h}
}

// newOutputBuffers returns a run's stdout and stderr buffers, made in one
// allocation.
func newOutputBuffers(limit int) (stdout, stderr *boundedBuffer) {
	bufs := new([2]boundedBuffer)
	bufs[0], bufs[1] = *newBoundedBuffer(limit), *newBoundedBuffer(limit)
	return &bufs[0], &bufs[1]
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if b.ring == nil {
		b.ring = make([]byte, b.ringCap)
	}
	b.rlen += int64(len(p))
	if len(p) >= len(b.ring) {
		copy(b.ring, p[len(p)-len(b.ring):])
		b.rpos = 0
		return n, nil
	}
	k := copy(b.ring[b.rpos:], p)
	copy(b.ring, p[k:])
	b.rpos = (b.rpos + len(p)) % len(b.ring)
	return n, nil
}

// Truncated reports that bytes were dropped.
func (b *boundedBuffer) Truncated() bool {
	return b.rlen > int64(b.ringCap)
}

// String is the kept text; when bytes were dropped, a marker between head
// and tail says how many.
func (b *boundedBuffer) String() string {
	if !b.Truncated() {
		var sb strings.Builder
		sb.Grow(len(b.head) + int(b.rlen))
		sb.Write(b.head)
		sb.Write(b.ring[:b.rlen])
		return sb.String()
	}
	tail := make([]byte, 0, len(b.ring))
	tail = append(tail, b.ring[b.rpos:]...)
	tail = append(tail, b.ring[:b.rpos]...)
	dropped := b.total - int64(len(b.head)) - int64(len(tail))
	return joinTruncated(string(b.head), string(tail), dropped)
}

func joinTruncated(head, tail string, dropped int64) string {
	// The cut may split a UTF-8 sequence at either edge.
	head = strings.ToValidUTF8(head, "")
	tail = strings.ToValidUTF8(tail, "")
	return head + fmt.Sprintf("\n... [%d bytes truncated] ...\n", dropped) + tail
}

// truncateString applies the same head-and-tail rule to a whole string.
func truncateString(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	h := limit / 2
	t := limit - h
	return joinTruncated(s[:h], s[len(s)-t:], int64(len(s)-limit)), true
}

// stream is the io.Writer an instance's fd 1 or 2 is bound to for its whole
// life. Each Run points it at a fresh buffer; between runs (or once the
// instance is abandoned) writes are dropped.
type stream struct {
	mu  sync.Mutex
	buf *boundedBuffer
}

func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.buf != nil {
		s.buf.Write(p)
	}
	s.mu.Unlock()
	return len(p), nil
}

func (s *stream) swap(b *boundedBuffer) *boundedBuffer {
	s.mu.Lock()
	old := s.buf
	s.buf = b
	s.mu.Unlock()
	return old
}
