package frontend

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

	// ctx ends when the session is deleted or expires, or execd's runs
	// are cancelled (it is a child of Server.runCtx); the session's runs,
	// whose contexts are its children, and its GET streams end with it.
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
	// parent is the parent of every session's context (Server.runCtx);
	// nil: context.Background().
	parent context.Context
	// key signs session ids (Options.SessionKey); nil: ids are random and
	// known only to this store.
	key []byte

	mu sync.Mutex
	m  map[string]*session
	// ended are signed ids this store deleted or expired, so that they are
	// not taken up again, until endedKeep has passed.
	ended map[string]time.Time
}

// endedKeep is how long an ended signed session id is remembered.
const endedKeep = 24 * time.Hour

func newSessionStore(ttl time.Duration, key []byte) *sessionStore {
	return &sessionStore{ttl: ttl, key: key, m: make(map[string]*session), ended: map[string]time.Time{}}
}

// create mints a session with a random 128-bit hex id; with a key, the id
// also carries its version and a signature (signedID). caps are the
// client's capabilities from initialize (a session taken up on another
// instance from its signed id has none).
func (st *sessionStore) create(principal, version string, caps json.RawMessage) *session {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	id := hex.EncodeToString(b[:])
	if st.key != nil {
		id = st.sign(principal, version, id)
	}
	s := st.newSession(id, principal, version)
	s.peer.setCapabilities(caps)
	st.mu.Lock()
	st.m[s.id] = s
	st.mu.Unlock()
	return s
}

func (st *sessionStore) newSession(id, principal, version string) *session {
	parent := st.parent
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	s := &session{id: id, principal: principal, version: version, peer: newPeer("s:" + id), ctx: ctx, cancel: cancel}
	s.touch()
	return s
}

// Signed session ids: a letter for the negotiated version, the random
// part (32 hex digits) and the first 128 bits of HMAC-SHA256(key,
// principal NUL version NUL random), in hex. Any instance holding the key
// can check that the id was minted for this principal, and knows its
// version.
var versionLetters = map[string]byte{Version20250326: 'a', Version20250618: 'b', VersionLatest: 'c'}

func (st *sessionStore) sign(principal, version, random string) string {
	return string(versionLetters[version]) + random + st.mac(principal, version, random)
}

func (st *sessionStore) mac(principal, version, random string) string {
	m := hmac.New(sha256.New, st.key)
	m.Write([]byte(principal + "\x00" + version + "\x00" + random))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// verify returns the version of a signed id minted for principal, or "".
func (st *sessionStore) verify(id, principal string) string {
	if len(id) != 1+32+32 {
		return ""
	}
	for v, l := range versionLetters {
		if id[0] == l && hmac.Equal([]byte(id[33:]), []byte(st.mac(principal, v, id[1:33]))) {
			return v
		}
	}
	return ""
}

// get returns the session with id for principal. Another principal's
// session is reported as not found, exactly like an unknown one. With a
// key, a signed id this store does not hold (another instance minted it)
// is taken up, unless this store ended it.
func (st *sessionStore) get(id, principal string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[id]
	if s == nil && st.key != nil {
		if _, ended := st.ended[id]; !ended {
			if v := st.verify(id, principal); v != "" {
				s = st.newSession(id, principal, v)
				st.m[id] = s
			}
		}
	}
	if s == nil || s.principal != principal {
		return nil
	}
	if s.expired(st.ttl) {
		st.endLocked(id, s, errSessionEnded)
		return nil
	}
	s.touch()
	return s
}

// endLocked forgets a session and cancels its runs.
func (st *sessionStore) endLocked(id string, s *session, cause error) {
	delete(st.m, id)
	if st.key != nil {
		st.ended[id] = time.Now()
	}
	s.cancel(cause)
}

// remove ends a session; its runs are cancelled.
func (st *sessionStore) remove(id, principal string) bool {
	st.mu.Lock()
	s := st.m[id]
	if s == nil || s.principal != principal {
		st.mu.Unlock()
		return false
	}
	st.endLocked(id, s, errSessionEnded)
	st.mu.Unlock()
	return true
}

// sweep drops expired sessions.
func (st *sessionStore) sweep() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, s := range st.m {
		if s.expired(st.ttl) {
			st.endLocked(id, s, errSessionEnded)
		}
	}
	for id, t := range st.ended {
		if time.Since(t) > endedKeep {
			delete(st.ended, id)
		}
	}
}

func (st *sessionStore) closeAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, s := range st.m {
		delete(st.m, id)
		s.cancel(ErrShutdown)
	}
}
