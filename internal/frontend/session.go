package frontend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"execd/internal/jsonrpc"
)

// session is a legacy-era HTTP session: it exists for correlation only
// (negotiated version, log level, cancellation). It never owns workspaces.
type session struct {
	id        string
	principal string
	version   string

	logMin   atomic.Int32
	lastUsed atomic.Int64 // unix nanoseconds
	active   atomic.Int32 // calls in flight: a session with one is never idle

	// ctx ends when the session is deleted or expires; the session's runs
	// and its GET streams end with it.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (s *session) setLogLevel(rank int) { s.logMin.Store(int32(rank)) }

func (s *session) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

// begin marks a call in flight; the returned end marks it done and counts
// as use, so that idle time starts when the last call ends.
func (s *session) begin() (end func()) {
	s.active.Add(1)
	return func() { s.touch(); s.active.Add(-1) }
}

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
func (st *sessionStore) create(principal, version string) *session {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &session{id: hex.EncodeToString(b[:]), principal: principal, version: version, ctx: ctx, cancel: cancel}
	s.logMin.Store(int32(levelRank("info")))
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

// inflight maps (scope, request id) to the cancel function of a running
// call, so that notifications/cancelled can reach it without waiting for
// anything. A scope is a legacy session or a stdio process.
type inflight struct {
	mu sync.Mutex
	m  map[string]context.CancelCauseFunc
}

func newInflight() *inflight { return &inflight{m: make(map[string]context.CancelCauseFunc)} }

func inflightKey(scope string, id jsonrpc.ID) string { return scope + "\x00" + id.Key() }

// add registers a call; it fails when the id is already in flight in the
// scope (ids must be unique per requestor and session).
func (f *inflight) add(scope string, id jsonrpc.ID, cancel context.CancelCauseFunc) bool {
	k := inflightKey(scope, id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.m[k]; dup {
		return false
	}
	f.m[k] = cancel
	return true
}

func (f *inflight) remove(scope string, id jsonrpc.ID) {
	f.mu.Lock()
	delete(f.m, inflightKey(scope, id))
	f.mu.Unlock()
}

// cancel cancels the call, if it is still running. Unknown ids are ignored.
func (f *inflight) cancel(scope string, id jsonrpc.ID) bool {
	f.mu.Lock()
	c := f.m[inflightKey(scope, id)]
	f.mu.Unlock()
	if c != nil {
		c(errClientCancel)
	}
	return c != nil
}

// pendingRequests are server-to-client requests waiting for the client's
// response, which the front end intercepts before routing.
type pendingRequests struct {
	mu   sync.Mutex
	next int64
	m    map[string]chan *jsonrpc.Message
}

func newPendingRequests() *pendingRequests {
	return &pendingRequests{m: make(map[string]chan *jsonrpc.Message)}
}

// open allocates an id in scope and a channel its response will arrive on.
func (p *pendingRequests) open(scope string) (jsonrpc.ID, <-chan *jsonrpc.Message, func()) {
	p.mu.Lock()
	p.next++
	id := jsonrpc.NewStringID("execd-" + strconv.FormatInt(p.next, 10))
	ch := make(chan *jsonrpc.Message, 1)
	k := inflightKey(scope, id)
	p.m[k] = ch
	p.mu.Unlock()
	return id, ch, func() {
		p.mu.Lock()
		delete(p.m, k)
		p.mu.Unlock()
	}
}

// deliver hands a client response to the request waiting for it. Unknown
// ids are dropped.
func (p *pendingRequests) deliver(scope string, m *jsonrpc.Message) bool {
	k := inflightKey(scope, m.ID)
	p.mu.Lock()
	ch := p.m[k]
	delete(p.m, k)
	p.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- m
	return true
}
