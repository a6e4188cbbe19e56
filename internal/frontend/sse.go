package frontend

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

// Server-sent events: the answer of a request that may carry notifications
// before its response (streamable-http.mdx: "text/event-stream"). execd
// sends no event ids and no retry field, because it does not resume
// streams (priming and Last-Event-ID resumption are not implemented).

const keepAliveEvery = 15 * time.Second

// sseWriter writes server-sent events, flushing each one. Writes are
// serialised; after a failed write every later write fails.
type sseWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	f   http.Flusher
	err error

	timer     *time.Timer // header delay, then keep-alives
	keepAlive time.Duration
	flushed   bool
	committed bool // the stream's status and headers are written
}

func newSSE(w http.ResponseWriter) *sseWriter {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil
	}
	return &sseWriter{w: w, f: f}
}

// headerDelay is how long the headers of a silent stream wait for the
// first event, so that a quick answer leaves in one write while a slow one
// still shows the client its stream at once.
const headerDelay = 20 * time.Millisecond

// begin arms the stream's one timer: the headers of a silent stream leave
// after headerDelay, then a keep-alive comment every keepAlive (0: none).
// A lazy stream writes no status until then or until its first event: if
// its answer comes first, the answer goes out alone as application/json
// (see last), which a client reads with less work than a stream. Otherwise
// the status is written at once.
func (s *sseWriter) begin(keepAlive time.Duration, lazy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !lazy {
		s.commitLocked()
	}
	s.keepAlive = keepAlive
	s.timer = time.AfterFunc(headerDelay, s.tick)
}

// commitLocked writes the stream's status and headers once; s.mu is held.
func (s *sseWriter) commitLocked() {
	if s.committed {
		return
	}
	s.committed = true
	h := s.w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = sseNoCache
	h["X-Accel-Buffering"] = sseNoBuffering
	writeHead(s.w, http.StatusOK)
}

func (s *sseWriter) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.commitLocked()
	if s.flushed && s.put([][]byte{sseKeepAlive, sseEnd}) != nil {
		return
	}
	s.f.Flush()
	s.flushed = true
	if s.keepAlive > 0 {
		s.timer.Reset(s.keepAlive)
	}
}

// end stops the timer and every later write; call it before the handler
// returns.
func (s *sseWriter) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.err = errStreamEnded
}

var errStreamEnded = errors.New("stream ended")

func (s *sseWriter) write(parts ...[]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.put(parts); err != nil {
		return err
	}
	s.f.Flush()
	s.flushed = true
	return nil
}

// last writes the stream's final event and ends the stream; the answer of
// a lazy stream that has sent nothing yet is the response itself, as
// application/json. It is not flushed: the handler returns next and
// net/http sends what is buffered in one write (with a Content-Length)
// instead of a flush and a closing chunk.
func (s *sseWriter) last(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && !s.committed {
		s.committed = true
		s.err = errStreamEnded
		writeJSON(s.w, http.StatusOK, b)
		return nil
	}
	if err := s.put([][]byte{sseData, b, sseEnd}); err != nil {
		return err
	}
	s.err = errStreamEnded
	return nil
}

// put writes parts unless the stream has failed or ended; s.mu is held.
func (s *sseWriter) put(parts [][]byte) error {
	if s.err != nil {
		return s.err
	}
	s.commitLocked()
	for _, p := range parts {
		if _, err := s.w.Write(p); err != nil {
			s.err = err
			return err
		}
	}
	return nil
}

// The headers of every stream (net/http only reads them).
var (
	sseContentType = []string{"text/event-stream"}
	sseNoCache     = []string{"no-cache"}
	sseNoBuffering = []string{"no"}
)

var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	sseKeepAlive = []byte(": keepalive")
)

// event writes one message as a data event. JSON from encoding/json has no
// raw newlines, so one data line suffices.
func (s *sseWriter) event(b []byte) error { return s.write(sseData, b, sseEnd) }
