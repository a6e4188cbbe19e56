package egress

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Observer watches every request: metrics count them, traces make a span
// of each. EgressStart is called when a request begins, its function
// when it ends, on the goroutine that runs it.
type Observer interface {
	EgressStart(ctx context.Context, r Start) (context.Context, func(Done))
}

// Start is a request as it begins. Host is the canonical host of its URL
// ("" when the URL is not one); nothing names a path, a query or a header.
type Start struct {
	Principal, Workspace string
	Method, Host         string
	Port                 int
}

// Done is how a request ended.
type Done struct {
	Outcome Outcome
	Reason  Reason // "" when allowed
	// Status is the final response's, 0 without one; Host the host that
	// gave it (the last hop's).
	Status    int
	Host      string
	Redirects int
	BytesOut  int64 // request bytes sent (all hops): request line, headers, body
	BytesIn   int64 // response body bytes received (all hops)
	Duration  time.Duration
}

// Entry is one request on the status page.
type Entry struct {
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`
	Host       string    `json:"host"`
	Status     int       `json:"status,omitempty"`
	Outcome    Outcome   `json:"outcome"`
	Reason     Reason    `json:"reason,omitempty"`
	BytesIn    int64     `json:"bytesIn"`
	BytesOut   int64     `json:"bytesOut"`
	DurationMs int64     `json:"durationMs"`
}

// WorkspaceRequests is a workspace's recent requests, newest first.
type WorkspaceRequests struct {
	Principal string  `json:"principal"`
	Workspace string  `json:"workspace"`
	Requests  []Entry `json:"requests"`
}

// recentLog keeps the last perWS requests of the last maxWS workspaces
// that made any.
type recentLog struct {
	maxWS, perWS int

	mu    sync.Mutex
	order *list.List // of *wsLog, most recent first
	by    map[[2]string]*list.Element
}

type wsLog struct {
	key     [2]string
	entries []Entry // a ring, next is where the next one goes
	next    int
	full    bool
}

func newRecentLog(maxWS, perWS int) *recentLog {
	return &recentLog{maxWS: maxWS, perWS: perWS, order: list.New(), by: map[[2]string]*list.Element{}}
}

func (r *recentLog) add(principal, workspace string, e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]string{principal, workspace}
	el := r.by[k]
	if el == nil {
		el = r.order.PushFront(&wsLog{key: k, entries: make([]Entry, r.perWS)})
		r.by[k] = el
		if r.order.Len() > r.maxWS {
			last := r.order.Back()
			r.order.Remove(last)
			delete(r.by, last.Value.(*wsLog).key)
		}
	} else {
		r.order.MoveToFront(el)
	}
	w := el.Value.(*wsLog)
	w.entries[w.next] = e
	w.next = (w.next + 1) % len(w.entries)
	w.full = w.full || w.next == 0
}

func (r *recentLog) list() []WorkspaceRequests {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]WorkspaceRequests, 0, r.order.Len())
	for el := r.order.Front(); el != nil; el = el.Next() {
		w := el.Value.(*wsLog)
		n := w.next
		if w.full {
			n = len(w.entries)
		}
		es := make([]Entry, 0, n)
		for i := 1; i <= n; i++ {
			es = append(es, w.entries[(w.next-i+len(w.entries))%len(w.entries)])
		}
		out = append(out, WorkspaceRequests{Principal: w.key[0], Workspace: w.key[1], Requests: es})
	}
	return out
}
