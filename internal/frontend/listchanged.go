package frontend

import (
	"sync"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// A legacy client with a stream of its own (stdio, or an HTTP session's
// GET stream while it is open) is told when the tool list changes:
// notifications/tools/list_changed, declared in initialize as
// tools.listChanged when Options.ToolsListChanged says the list may
// change. The modern era has no such push (its lists carry ttlMs).

// listeners are the peers with a stream of their own open, each with the
// count of its streams open (a session may open a second GET stream).
type listeners struct {
	mu sync.Mutex
	m  map[*peer]int
}

// add notes p's stream open; the returned func notes it closed.
func (l *listeners) add(p *peer) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[*peer]int)
	}
	l.m[p]++
	return func() {
		l.mu.Lock()
		if l.m[p]--; l.m[p] <= 0 {
			delete(l.m, p)
		}
		l.mu.Unlock()
	}
}

func (l *listeners) list() []*peer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*peer, 0, len(l.m))
	for p := range l.m {
		out = append(out, p)
	}
	return out
}

// NotifyToolsChanged sends notifications/tools/list_changed to every
// legacy client that has initialized and has a stream of its own open,
// when Options.ToolsListChanged is set (otherwise initialize did not
// declare it, and nothing is sent). Each stream is written on its own
// goroutine: a slow client holds up neither the caller nor the others.
func (s *Server) NotifyToolsChanged() {
	if !s.opts.ToolsListChanged {
		return
	}
	b, err := jsonrpc.EncodeNotification("notifications/tools/list_changed", nil)
	if err != nil {
		return
	}
	for _, p := range s.listening.list() {
		if p.capabilities() == nil {
			continue // not initialized: not a legacy client (yet)
		}
		go func() {
			if err := p.send(b); err != nil {
				s.log.Debug("tools/list_changed not sent", zap.String("peer", p.scope), zap.Error(err))
			}
		}()
	}
}
