package frontend

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// Interception: the two messages that act on a request already in flight
// and therefore must never wait behind anything (RATIONALE.md, "Why are
// cancels and client responses handled before routing?"). Every transport
// hands every message that is not a request to intercept, once its peer is
// known; nothing here blocks, and neither kind is counted or queued.

// intercept acts on a notification or a client response of peer: a
// notifications/cancelled cancels the request it names, a response is
// delivered to the server request that waits for it. Unknown ids, other
// notifications and messages without a peer (the modern era over HTTP,
// where closing the stream is the cancel) are dropped.
func (s *Server) intercept(p *peer, msg *jsonrpc.Message) {
	if p == nil {
		if msg.IsResponse() {
			// No live session of this principal: nothing of its can wait.
			s.log.Info("client response ignored: it belongs to no session of this client", zap.String("id", msg.ID.String()))
		}
		return
	}
	switch {
	case msg.IsResponse():
		if !s.pending.deliver(p.scope, msg) {
			// Unknown, answered already, or another session's request.
			s.log.Info("client response ignored: no request of this session waits for it", zap.String("scope", p.scope), zap.String("id", msg.ID.String()))
		}
	case msg.Method == "notifications/cancelled":
		var params struct {
			RequestID jsonrpc.ID `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &params) != nil || !params.RequestID.Valid() {
			return
		}
		if s.inflight.cancel(p.scope, params.RequestID) {
			s.log.Debug("cancelled", zap.String("scope", p.scope), zap.String("id", params.RequestID.String()))
		}
	}
}

// callKey names a request id within a peer's scope, by value (100 and 1E2
// are one id).
type callKey struct{ scope, id string }

func keyOf(scope string, id jsonrpc.ID) callKey { return callKey{scope, id.Key()} }

// inflight maps the requests running in each peer to their cancel
// functions.
type inflight struct {
	mu sync.Mutex
	m  map[callKey]context.CancelCauseFunc
}

func newInflight() *inflight { return &inflight{m: make(map[callKey]context.CancelCauseFunc)} }

// add registers a request; it fails when the id is already in flight in
// the scope (ids are unique per requestor and session, spec:
// basic/index.mdx §Requests).
func (f *inflight) add(scope string, id jsonrpc.ID, cancel context.CancelCauseFunc) bool {
	k := keyOf(scope, id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.m[k]; dup {
		return false
	}
	f.m[k] = cancel
	return true
}

func (f *inflight) remove(scope string, id jsonrpc.ID) {
	k := keyOf(scope, id)
	f.mu.Lock()
	delete(f.m, k)
	f.mu.Unlock()
}

// cancel cancels the request as the client's cancel, if it is still in
// flight.
func (f *inflight) cancel(scope string, id jsonrpc.ID) bool {
	f.mu.Lock()
	c := f.m[keyOf(scope, id)]
	f.mu.Unlock()
	if c != nil {
		c(errClientCancel)
	}
	return c != nil
}

// pendingRequests are server-to-client requests waiting for the client's
// response (input.go, askClient).
type pendingRequests struct {
	mu   sync.Mutex
	next int64
	m    map[callKey]chan *jsonrpc.Message
}

func newPendingRequests() *pendingRequests {
	return &pendingRequests{m: make(map[callKey]chan *jsonrpc.Message)}
}

// open allocates an id in scope and the channel its response will arrive
// on; done forgets it.
func (p *pendingRequests) open(scope string) (id jsonrpc.ID, response <-chan *jsonrpc.Message, done func()) {
	p.mu.Lock()
	p.next++
	id = jsonrpc.NewStringID("execd-" + strconv.FormatInt(p.next, 10))
	ch := make(chan *jsonrpc.Message, 1)
	k := keyOf(scope, id)
	p.m[k] = ch
	p.mu.Unlock()
	return id, ch, func() {
		p.mu.Lock()
		delete(p.m, k)
		p.mu.Unlock()
	}
}

// deliver hands a client response to the request waiting for it; false
// when none waits (an unknown id, a second response, another scope's).
func (p *pendingRequests) deliver(scope string, m *jsonrpc.Message) bool {
	k := keyOf(scope, m.ID)
	p.mu.Lock()
	ch := p.m[k]
	delete(p.m, k)
	p.mu.Unlock()
	if ch != nil {
		ch <- m
	}
	return ch != nil
}
