package frontend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// session is a legacy-era HTTP session: it exists for correlation only
// (negotiated version, log level, cancellation). It never owns workspaces.
type session struct {
	id        string
	principal string
	version   string
	peer      *peer // scope "s:<id>"; the log level set by logging/setLevel

	lastUsed atomic.Int64 // unix nanoseconds
	active   atomic.Int32 // calls in flight: a session with one is never idle

	// ctx ends when the session is deleted or expires; the session's runs
	// and its GET streams end with it.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (s *session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// begin marks a call in flight; end marks it done and counts as use, so
// that idle time starts when the last call ends.
func (s *session) begin() { s.active.Add(1) }

func (s *session) end() { s.touch(); s.active.Add(-1) }

// expired reports whether the session has been idle longer than ttl.
func (s *session) expired(ttl time.Duration) bool {
	return ttl > 0 && s.active.Load() == 0 && time.Since(time.Unix(0, s.lastUsed.Load())) > ttl
}

// sessionStore holds the live sessions and expires idle ones.
type sessionStore struct {
	ttl time.Duration

	mu sync.Mutex
	m  map[string]*session
}

func newSessionStore(ttl time.Duration) *sessionStore {
	return &sessionStore{ttl: ttl, m: make(map[string]*session)}
}

// create mints a session with a random 128-bit hex id.
func (st *sessionStore) create(principal, version string, caps json.RawMessage) *session {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	id := hex.EncodeToString(b[:])
	s := &session{id: id, principal: principal, version: version, peer: newPeer("s:" + id), ctx: ctx, cancel: cancel}
	s.peer.setCapabilities(caps)
	s.touch()
	st.mu.Lock()
	st.m[s.id] = s
	st.mu.Unlock()
	return s
}

// get returns the session with id for principal. Another principal's
// session is reported as not found, exactly like an unknown one.
func (st *sessionStore) get(id, principal string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[id]
	if s == nil || s.principal != principal {
		return nil
	}
	if s.expired(st.ttl) {
		delete(st.m, id)
		s.cancel(errSessionEnded)
		return nil
	}
	s.touch()
	return s
}

// remove ends a session; its runs are cancelled.
func (st *sessionStore) remove(id, principal string) bool {
	st.mu.Lock()
	s := st.m[id]
	if s == nil || s.principal != principal {
		st.mu.Unlock()
		return false
	}
	delete(st.m, id)
	st.mu.Unlock()
	s.cancel(errSessionEnded)
	return true
}

// sweep drops expired sessions.
func (st *sessionStore) sweep() {
	if st.ttl <= 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, s := range st.m {
		if s.expired(st.ttl) {
			delete(st.m, id)
			s.cancel(errSessionEnded)
		}
	}
}

func (st *sessionStore) closeAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, s := range st.m {
		delete(st.m, id)
		s.cancel(errShutdown)
	}
}
